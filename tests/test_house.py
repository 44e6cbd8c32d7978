"""The tree stays easy to carry on: imports run one way, functions fit on a screen, the docs speak
of what the project is rather than of how it came to be (dated records live in docs/history/), the
docs stay a read, and the README's results fit on a screen."""

import ast
import graphlib
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LONGEST_FUNCTION = 60  # lines, decorators excluded, docstring included
HISTORY = re.compile(r"seed 00[0-9]|[A-Za-z]+ issue\b", re.I)  # "seed 004", "the Speed issue"
SCREEN = 30  # lines
DOCS_WORDS = 20_000  # docs/*.md outside docs/history/, counted as `wc -w` does
DATE = re.compile(r"\b\d{4}-\d{2}\b")  # 2026-12 or 2026-12-06


def tracked(*patterns: str) -> list[Path]:
    """The repository's tracked files matching the git pathspecs (a clean clone has only these)."""
    out = subprocess.run(["git", "ls-files", "-z", "--", *patterns], cwd=ROOT, capture_output=True,
                         check=True).stdout.decode()
    return [ROOT / p for p in out.split("\0") if p and (ROOT / p).exists()]


def module_names(top: Path, package_root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under `top` (packages by their __init__)."""
    names = {}
    for path in sorted(top.rglob("*.py")):
        parts = path.relative_to(package_root).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def imports_of(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """The modules of `known` that `path` (module `name`) imports at module level, relative
    imports resolved. Imports inside functions count too: hiding a loop in a function is a loop."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in found if m in known and m != name}


def import_graph(top: Path, package_root: Path) -> dict[str, set[str]]:
    known = module_names(top, package_root)
    return {name: imports_of(path, name, known) for name, path in known.items()}


@pytest.mark.parametrize("top, package_root",
                         [(ROOT / "benchmarks", ROOT), (ROOT / "src" / "rnnsearch", ROOT / "src")],
                         ids=["benchmarks", "src"])
def test_imports_have_no_cycle(top, package_root):
    graph = import_graph(top, package_root)
    assert len(graph) > 5
    try:
        list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as e:
        pytest.fail(f"import cycle: {' -> '.join(e.args[1])}")


def test_the_cycle_check_finds_a_cycle(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from . import a  # hidden in a function: still a loop\n")
    graph = import_graph(pkg, tmp_path)
    assert "pkg.b" in graph["pkg.a"] and "pkg.a" in graph["pkg.b"]
    with pytest.raises(graphlib.CycleError):
        list(graphlib.TopologicalSorter(graph).static_order())


def test_benchmarks_import_as_a_package_without_editing_sys_path():
    edits = ["sys.path." + verb for verb in ("insert", "append")]  # spelled so as not to match here
    for path in tracked("benchmarks/*.py", "tests/*.py"):
        text = path.read_text(encoding="utf-8")
        assert not any(edit in text for edit in edits), path.name
    for path in tracked("benchmarks/*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.module.startswith("__"):
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private, f"{path.name} imports private {private} from {node.module}"


def long_functions(paths: list[Path], base: Path = ROOT) -> list[str]:
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > LONGEST_FUNCTION:
                    found.append(f"{path.relative_to(base)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_is_longer_than_a_screen():
    assert long_functions(tracked("src/*.py", "benchmarks/*.py")) == []


def test_the_length_check_finds_a_long_function(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(LONGEST_FUNCTION))
    path = tmp_path / "probe.py"
    path.write_text(f"def short():\n    pass\n\n\ndef long():\n{body}")
    assert long_functions([path], tmp_path) == [f"probe.py:5 long ({LONGEST_FUNCTION + 1} lines)"]


def test_docs_and_help_speak_of_the_project_not_its_history():
    """Users cannot look up "seed 004" or "the Speed issue": outside docs/history/ name the thing."""
    texts = tracked("*.md", "*.py", "*.yaml", "*.toml", "*.ipynb", "*.sh", "*.txt", ".ci/*")
    assert len(texts) > 50
    hits = []
    for path in texts:
        if "docs/history/" in path.as_posix():
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if HISTORY.search(line) and path.name != "test_house.py":
                hits.append(f"{path.relative_to(ROOT)}:{n}: {HISTORY.search(line).group(0)}")
    assert hits == []


def test_readme_results_fit_on_one_screen():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Results\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert section is not None, "README.md has no Results section"
    lines = section.group(1).strip().splitlines()
    assert len(lines) <= SCREEN, f"README Results is {len(lines)} lines, more than a screen ({SCREEN})"
    assert len(re.findall(r"\]\((docs/[^)#]+)", section.group(1))) >= 3, "the section links to the docs"


def dated_headings(paths: list[Path]) -> list[str]:
    """`file:line heading` for each Markdown heading (outside code fences) that carries a date: a
    dated section is a record of its day, and belongs in docs/history/."""
    found = []
    for path in paths:
        fenced = False
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
            elif not fenced and re.match(r"#{1,6} ", line) and DATE.search(line):
                found.append(f"{path.name}:{n} {line}")
    return found


def current_docs() -> list[Path]:
    return sorted((ROOT / "docs").glob("*.md"))  # docs/history/ is a folder below, not matched


def test_the_docs_are_current_pages_of_a_reads_length():
    docs = current_docs()
    assert len(docs) >= 8
    words = {p.name: len(p.read_text(encoding="utf-8").split()) for p in docs}
    assert sum(words.values()) <= DOCS_WORDS, (
        f"docs/*.md hold {sum(words.values())} words, over {DOCS_WORDS}: move dated runs to "
        f"docs/history/ ({sorted(words.items(), key=lambda kv: -kv[1])})")
    assert dated_headings(docs + [ROOT / "README.md", ROOT / "README.zh-CN.md"]) == []


def test_the_date_check_finds_a_dated_heading(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Speed\n\n## Time to BLEU\n\n```sh\n# run on 2026-12-06\n```\n"
                    "## AVX2, with int8 (2026-12-06)\n\nmeasured 2026-12-07\n### December (2026-11)\n",
                    encoding="utf-8")
    assert dated_headings([page]) == ["page.md:8 ## AVX2, with int8 (2026-12-06)",
                                      "page.md:11 ### December (2026-11)"]
