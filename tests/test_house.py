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
PAGE_WORDS = {"benchmarks.md": 2_000, "alignment.md": 2_000}  # current pages; any other: 2,500
README_LINES = 150
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


# The rooms of src/rnnsearch, lowest first: a module may import its own room and the rooms below it,
# never one above. engine/'s shared modules (checkpoint, distributed, precision) sit with data/.
LAYERS = [
    ("rnnsearch.config", "rnnsearch.io"),
    ("rnnsearch.nn",),
    ("rnnsearch.engine.data", "rnnsearch.engine.checkpoint", "rnnsearch.engine.distributed",
     "rnnsearch.engine.precision"),
    ("rnnsearch.engine.align",),
    ("rnnsearch.engine.accel",),
    ("rnnsearch.engine.decode",),
    ("rnnsearch.engine.train", "rnnsearch.engine"),
    ("rnnsearch.tools",),
    ("rnnsearch.serve",),
    ("rnnsearch.cli", "rnnsearch.__main__", "rnnsearch"),
]


def layer_of(module: str) -> int:
    """The index in LAYERS of the longest prefix naming `module`'s room."""
    best, index = -1, None
    for k, rooms in enumerate(LAYERS):
        for room in rooms:
            if (module == room or module.startswith(room + ".")) and len(room) > best:
                best, index = len(room), k
    assert index is not None, f"{module} is in no room of LAYERS"
    return index


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} imports {b}" for a, deps in graph.items() for b in deps
                  if layer_of(b) > layer_of(a) and not (a == "rnnsearch" or b.startswith(a + ".")))


def test_imports_run_only_downwards():
    """nn/ knows nothing of engine/, engine/ nothing of tools/, serve/ or cli/; inside engine/,
    data < align < accel < decode < train. (A package's __init__ may re-export what is below it.)"""
    graph = import_graph(ROOT / "src" / "rnnsearch", ROOT / "src")
    assert upward_imports(graph) == []


def test_the_layer_check_finds_an_upward_import():
    graph = {"rnnsearch.nn.model": {"rnnsearch.engine.decode.translator"},
             "rnnsearch.engine.data.vocab": {"rnnsearch.nn.model"},
             "rnnsearch.engine.align.links": {"rnnsearch.engine.train.trainer"}}
    assert upward_imports(graph) == ["rnnsearch.engine.align.links imports rnnsearch.engine.train.trainer",
                                     "rnnsearch.nn.model imports rnnsearch.engine.decode.translator"]


def listed_files(package: Path) -> tuple[set[str], set[str]]:
    """(the files of `package` its __init__ docstring should name, the names it does not)."""
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""
    named = {m.group(0) for m in re.finditer(r"\b\w+(?:\.py|\.sha256|/)", doc)}
    files = {p.name for p in package.glob("*.py") if p.name != "__init__.py"}
    files |= {p.name + "/" for p in package.iterdir() if (p / "__init__.py").exists()}
    return files, files - named


def packages() -> list[Path]:
    """Every package below rnnsearch/ (the root's own table is the README's, tested in test_docs)."""
    src = ROOT / "src" / "rnnsearch"
    return sorted(p.parent for p in src.rglob("*/__init__.py"))


@pytest.mark.parametrize("package", packages(), ids=lambda p: p.name)
def test_every_package_names_its_files(package):
    """A package's opening docstring is its file table: every module and subpackage is named."""
    files, missing = listed_files(package)
    assert files, package
    assert missing == set(), f"{package.relative_to(ROOT)}/__init__.py does not name {sorted(missing)}"


def test_the_table_check_finds_an_unnamed_file(tmp_path):
    (tmp_path / "__init__.py").write_text('"""A room.\n\n    a.py  the first\n"""\n')
    (tmp_path / "a.py").write_text("")
    (tmp_path / "b.py").write_text("")
    assert listed_files(tmp_path) == ({"a.py", "b.py"}, {"b.py"})


def alike(names: list[str]) -> list[tuple[str, str]]:
    """Pairs of module names a reader could take for one another: equal, or sharing their first four
    letters (corpus and corpora, alignment and aligner, model and models)."""
    stems = sorted(set(names))
    pairs = [(a, b) for i, a in enumerate(stems) for b in stems[i + 1:] if a[:4] == b[:4] and len(a) >= 4]
    dupes = sorted({n for n in names if names.count(n) > 1})
    return [(n, n) for n in dupes] + pairs


def test_no_two_modules_are_named_alike():
    """cli/ is left out: its modules are named for the commands they define (`train`, `translate`)."""
    src = ROOT / "src" / "rnnsearch"
    names = [p.stem for p in src.rglob("*.py")
             if p.stem not in ("__init__", "__main__") and "cli" not in p.relative_to(src).parts]
    assert alike(names) == []


def test_the_name_check_finds_alike_names():
    assert alike(["corpus", "corpora", "gru", "model", "model", "io"]) == [
        ("model", "model"), ("corpora", "corpus")]


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
    long_pages = {name: n for name, n in words.items()
                  if n > PAGE_WORDS.get(name, 2_500) and name != "api.md"}
    assert long_pages == {}, f"pages over their words (api.md, generated, aside): {long_pages}"
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(readme) <= README_LINES, f"README.md is {len(readme)} lines, over {README_LINES}"
    assert any(line.startswith("## Reading order") for line in readme[:60]), "no reading order in 60 lines"


def test_the_date_check_finds_a_dated_heading(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Speed\n\n## Time to BLEU\n\n```sh\n# run on 2026-12-06\n```\n"
                    "## AVX2, with int8 (2026-12-06)\n\nmeasured 2026-12-07\n### December (2026-11)\n",
                    encoding="utf-8")
    assert dated_headings([page]) == ["page.md:8 ## AVX2, with int8 (2026-12-06)",
                                      "page.md:11 ### December (2026-11)"]
