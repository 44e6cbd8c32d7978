"""The documentation stays true: the API reference matches the code, links land, commands parse."""

import re
import runpy
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDES = [ROOT / "docs" / "guide.md", ROOT / "docs" / "guide.zh-CN.md"]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md", ROOT / "README.zh-CN.md"]


def anchors(text: str) -> list[str]:
    api = runpy.run_path(str(ROOT / "docs" / "make_api.py"))
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    return [api["anchor"](h) for h in re.findall(r"^#+ (.+)$", prose, re.M)]


def test_api_reference_and_guide_code_links_are_current():
    api = runpy.run_path(str(ROOT / "docs" / "make_api.py"))
    assert (ROOT / "docs" / "api.md").read_text(encoding="utf-8") == api["render"](), \
        "docs/api.md is stale: run python docs/make_api.py"
    for guide in GUIDES:
        text = guide.read_text(encoding="utf-8")
        assert len(api["CODE_LINK"].findall(text)) >= 15, guide.name
        assert text == api["refresh_code_links"](text), (
            f"{guide.name}: code line links are stale: run python docs/make_api.py")


def test_api_reference_links_land_on_one_entry():
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    names = anchors(text)
    assert len(names) == len(set(names)), "two headings share an anchor"
    links = re.findall(r"\]\(#([^)]+)\)", text)
    assert len(links) > 45
    assert sorted(set(links) - set(names)) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_relative_links_point_at_files(doc):
    text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#")[0]
        assert (doc.parent / path).exists(), f"{doc.name}: link to missing {target}"


def fenced_commands(doc: Path) -> list[str]:
    """The `rnnsearch ...` lines of the document's sh blocks (continuations joined, comments cut)."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            if line.startswith("rnnsearch "):
                commands.append(line)
    return commands


@pytest.mark.parametrize("doc", GUIDES, ids=lambda p: p.name)
def test_every_guide_command_parses(doc):
    """Each command of the guide is accepted by the real command line, and the files it names exist."""
    from rnnsearch.cli import build_parser

    parser = build_parser()
    commands = fenced_commands(doc)
    assert len(commands) >= 8
    for command in commands:
        argv = shlex.split(command)[1:]
        argv = [a for a in argv if a not in ("<", ">")]
        try:
            parser.parse_args(argv)
        except SystemExit:
            pytest.fail(f"{doc.name}: `{command}` is not a valid command")
        for arg in argv:
            if arg.startswith(("configs/", "docs/", "notebooks/")):
                assert (ROOT / arg).exists(), f"{doc.name}: `{command}` names missing {arg}"


def test_guides_run_the_same_commands():
    """The Chinese guide is kept in step with the English one: the same commands, in the same order."""
    assert fenced_commands(GUIDES[0]) == fenced_commands(GUIDES[1])


def test_the_figure_script_runs_the_guides_commands():
    figures = runpy.run_path(str(ROOT / "docs" / "make_figures.py"))
    guide = fenced_commands(GUIDES[0])
    for template in figures["COMMANDS"]:
        assert template.format(**figures["GUIDE_PATHS"]) in guide, template


def test_make_figures_on_a_tiny_model(tmp_path):
    """The figure script end to end, with a few-second demo model standing in for both models."""
    from rnnsearch.tools.demo import run_demo

    run_demo(tmp_path / "demo", seed=2, n_train=300, steps=5, progress=False)
    model = str(tmp_path / "demo" / "model")
    figures = runpy.run_path(str(ROOT / "docs" / "make_figures.py"))
    out = tmp_path / "figures"
    assert figures["main"](["--demo", model, "--tatoeba", model, "--out", str(out),
                            "--structure-epochs", "1"]) == 0
    for name in ("demo_apple.png", "demo_explorer.html", "tatoeba_apple.png", "tatoeba_explorer.html"):
        assert (out / name).stat().st_size > 1000, name
    assert (out.parent / "structure.png").stat().st_size > 1000  # one copy, beside the guide's folder
    assert "注意力" in (out / "tatoeba_explorer.html").read_text(encoding="utf-8")  # --lang zh labels
    assert figures["main"](["--demo", str(tmp_path / "nope"), "--out", str(out)]) == 2


# Commands that train for minutes or fetch from the internet: parsed above, run in full only by a person
# (their measured output is in the docs); every other command of the guide runs below as written.
LONG = ("demo", "experiment", "train", "data get", "figure")


def test_guide_commands_run_as_written(tmp_path, monkeypatch):
    """In a scratch tree laid out as the guide expects (a tiny demo model at rnnsearch-demo/, the same
    weights standing in for the Tatoeba model, a small corpus at data/tatoeba_cmn_eng/), every
    quick command of the guide runs exactly as written and succeeds."""
    import gzip
    import shutil

    from rnnsearch.cli import main
    from rnnsearch.tools.demo import run_demo

    run_demo(tmp_path / "rnnsearch-demo", seed=2, n_train=300, steps=5, progress=False)
    shutil.copytree(tmp_path / "rnnsearch-demo" / "model", tmp_path / "runs" / "tatoeba_en_zh")
    shutil.copytree(ROOT / "docs" / "figures" / "guide", tmp_path / "docs" / "figures" / "guide",
                    ignore=shutil.ignore_patterns("*.png", "*.html"))
    corpus = tmp_path / "data" / "tatoeba_cmn_eng"
    corpus.mkdir(parents=True)
    for name, line in (("en", "i ate {} apples yesterday ."), ("zh", "我 昨天 吃 了 {} 个 苹果 。"),
                       ("attribution", "CC-BY 2.0 (France) Attribution: tatoeba.org #{}")):
        text = "".join(line.format(i) + "\n" for i in range(2500))
        (corpus / f"all.{name}.gz").write_bytes(gzip.compress(text.encode()))
    monkeypatch.chdir(tmp_path)
    ran = 0
    for command in fenced_commands(GUIDES[0]):
        if command.startswith(tuple(f"rnnsearch {c}" for c in LONG)):
            continue
        argv = shlex.split(command)[1:]
        assert main(argv) == 0, command
        ran += 1
    assert ran >= 8
    assert (tmp_path / "docs" / "figures" / "guide" / "tatoeba_explorer.html").exists()
    assert (tmp_path / "data" / "tatoeba_en_zh" / "test.zh").exists()


def test_the_readme_file_table_names_every_module():
    """README's table of src/rnnsearch's folders names each module a user may look for, in the row
    of its own folder."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = {}
    for line in text.splitlines():
        if line.startswith("| `"):
            folder = line.split("`")[1]
            rows[folder] = rows.get(folder, "") + line
    src = ROOT / "src" / "rnnsearch"
    folders = ["nn/", "engine/", "engine/data/", "engine/align/", "engine/accel/", "engine/decode/",
               "engine/train/", "tools/"]
    missing = [str(p.relative_to(src)) for folder in folders for p in sorted((src / folder).glob("*.py"))
               if p.name != "__init__.py" and f"`{p.name}`" not in rows.get(folder, "")]
    assert not missing, f"README's file table does not name {missing} in their folder's row"
    assert {"serve/", "cli/"} <= set(rows), "README's file table has no row for serve/ or cli/"


def invalid_commands(doc: Path) -> list[str]:
    """The `rnnsearch ...` lines of the document's sh blocks that the real command line refuses
    (redirections and what the command is piped into left out), each with argparse's message."""
    import contextlib
    import io

    from rnnsearch.cli import build_parser

    parser, bad = build_parser(), []
    for command in fenced_commands(doc):
        words = shlex.split(command)[1:]
        for end in ("|", "&&", ";"):  # the rnnsearch command only, not what it is piped into
            words = words[:words.index(end)] if end in words else words
        # redirections and their files are the shell's, not the command's
        argv = [w for k, w in enumerate(words)
                if w not in ("<", ">", "2>") and (k == 0 or words[k - 1] not in ("<", ">", "2>"))]
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                parser.parse_args(argv)
        except SystemExit:
            bad.append(f"`{command}`: {err.getvalue().strip().splitlines()[-1]}")
    return bad


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_documented_command_parses(doc):
    """Every `rnnsearch ...` line of a sh block in README.md and docs/*.md is accepted by the real
    command line: an unknown flag or a wrong choice fails here."""
    assert invalid_commands(doc) == [], doc.name


def test_the_command_check_catches_a_made_up_flag(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("```sh\nrnnsearch translate --model M --beam 5\n"
                   "rnnsearch translate --model M --beem 5 < in.txt > out.txt\n"
                   "rnnsearch train CONFIG --precision fp8\n```\n", encoding="utf-8")
    bad = invalid_commands(doc)
    assert len(bad) == 2 and "--beem" in bad[0] and "fp8" in bad[1]


NOT_KEYS = {"py", "safetensors", "json", "jsonl", "log", "gz", "en", "de", "fr", "zh", "src", "tgt", "step"}


def unknown_config_keys(text: str) -> list[str]:
    """`section.key` mentions (in backticks or after --set) that name no field of the config
    (file names such as `model.safetensors` and methods such as `model.step` aside)."""
    import dataclasses

    from rnnsearch import config

    sections = {name: {f.name for f in dataclasses.fields(getattr(config, f"{name.title()}Config"))}
                for name in ("data", "vocab", "model", "train", "decode")}
    mentions = re.finditer(r"(?:`|--set\s+)(data|vocab|model|train|decode)\.([a-z_]+)(?=[`=:\s])", text)
    return [m.group(0).strip("`") for m in mentions
            if m.group(2) not in NOT_KEYS and m.group(2) not in sections[m.group(1)]]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_config_key_the_docs_name_exists(doc):
    assert unknown_config_keys(doc.read_text(encoding="utf-8")) == [], doc.name


def test_the_key_check_catches_a_made_up_key():
    text = "set `train.max_steps` and `model.alignment_head`, not `train.max_stepz` or --set decode.beems=3"
    assert unknown_config_keys(text) == ["train.max_stepz", "--set decode.beems"]


def samples_module():
    return runpy.run_path(str(ROOT / "docs" / "make_samples.py"))


def test_the_usage_samples_have_the_form_the_commands_print(tmp_path):
    """docs/usage.md's "What the commands print" is real output of docs/make_samples.py; the same
    commands, run now with a 40-step demo, must still print every shown line in the same form
    (numbers, translations and the demo's verdict aside)."""
    pytest.importorskip("uvicorn", reason="the serve sample needs the [serve] extra")
    ms = samples_module()
    page = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    shown, fresh = ms["shown"](page), ms["run_samples"](tmp_path, demo_steps=40)
    form = ms["form"]
    assert [form(c) for c, _ in shown] == [form(c) for c, _ in fresh], "rerun python docs/make_samples.py"
    for (command, lines), (_, now) in zip(shown, fresh):
        printed = {form(x) for x in now}
        stale = [x for x in lines if form(x) not in printed]
        assert not stale, f"`{command}` no longer prints {stale}: rerun python docs/make_samples.py"


def test_the_sample_check_tells_a_changed_line_from_a_changed_number():
    form = samples_module()["form"]
    assert form("test BLEU 99.9 (…), exact 97.0%") == form("test BLEU 0.0 (…), exact 5.5%")
    assert form("  → 我 昨天 吃 了 。") == form("  → 了 了")
    assert form("a b ||| 0-0 1-1") == form("c ||| 3-0 3-1 3-2")  # links kept as links, any number
    assert form("test BLEU 99.9") != form("test bleu 99.9")
    assert form('"aer": 0.153,') != form('"aer_soft": 0.153,')


def results_rows(readme: str) -> list[tuple[str, str, list[str]]]:
    """(what, figure, the JSON records it links) for each row of README's Results table."""
    section = readme.split("\n## Results\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("what", "---"):
            rows.append((cells[0], cells[1], re.findall(r"\]\(([^)#]+\.json)\)", cells[2])))
    return rows


def numbers_in(record) -> set[float]:
    if isinstance(record, dict):
        return set().union(*(numbers_in(v) for v in record.values())) if record else set()
    if isinstance(record, list):
        return set().union(*(numbers_in(v) for v in record)) if record else set()
    if isinstance(record, bool):
        return set()
    if isinstance(record, (int, float)):
        return {float(record)}
    if isinstance(record, str):
        return {float(x) for x in re.findall(r"\d+(?:\.\d+)?", record)}
    return set()


def missing_figures(figure: str, records: list[dict]) -> list[str]:
    """The numbers of `figure` with a decimal point (41.55, 1.68–1.80×, 268.1k, 98.2%) that no value
    of the records gives at the figure's precision (a share may be kept as 0.982, a count as 268100)."""
    values = set().union(*(numbers_in(r) for r in records)) if records else set()
    missing = []
    for m in re.finditer(r"(\d+\.(\d+))(k|%)?", figure.replace(",", "")):
        x, places, unit = float(m.group(1)), len(m.group(2)), m.group(3)
        scale = {"k": [1e-3], "%": [1, 100]}.get(unit or "", [1])
        if not any(round(v * s, places) == x for v in values for s in scale):
            missing.append(m.group(0))
    return missing


def test_every_readme_result_is_in_a_committed_record():
    """Each row of README's Results links the JSON it came from, and every figure of the row with a
    decimal point is in that JSON."""
    import json

    rows = results_rows((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(rows) >= 10
    for what, figure, links in rows:
        assert links, f"README Results row {what!r} links no JSON record"
        records = [json.loads((ROOT / link).read_text(encoding="utf-8")) for link in links]
        assert missing_figures(figure, records) == [], what


def test_the_record_check_catches_a_figure_that_is_not_there():
    record = {"bleu": 41.547, "share": 0.982, "tok_per_s": 268123.0, "ratio": [1.6812, 1.80]}
    assert missing_figures("**41.55** BLEU, 98.2%, 268.1k, 1.68–1.80×", [record]) == []
    assert missing_figures("**41.65** BLEU, 98.3%", [record]) == ["41.65", "98.3%"]
