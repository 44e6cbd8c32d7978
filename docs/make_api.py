"""Writes docs/api.md, the API reference, from the docstrings of the public API (each entry's
signature and the first paragraph of its docstring), and keeps the line numbers of the guides'
code links current.

    python docs/make_api.py            # rewrite docs/api.md and the guides' code links
    python docs/make_api.py --check    # exit 1 if any of them is not what the code says

A name in backticks that is itself documented here (`Translator.translate`, `train`) becomes a
link to its entry; tests/test_docs.py checks that every link lands on an entry.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import re
import sys
import typing
from pathlib import Path

# (section, [(qualified import path, name shown)]) — the public API, in reading order.
API = [
    ("Translate with a trained model", [
        ("rnnsearch.engine.decode.loading.load", "load"),
        ("rnnsearch.engine.decode.translator.Translator", "Translator"),
        ("rnnsearch.engine.decode.translator.Translator.translate", "Translator.translate"),
        ("rnnsearch.engine.decode.translator.Translator.translate_n_best", "Translator.translate_n_best"),
        ("rnnsearch.engine.decode.translator.Translator.force", "Translator.force"),
        ("rnnsearch.engine.decode.translator.Translation", "Translation"),
        ("rnnsearch.engine.decode.translator.Translation.attention_json", "Translation.attention_json"),
        ("rnnsearch.engine.decode.translator.Translation.links", "Translation.links"),
        ("rnnsearch.engine.decode.translator.Translation.replace_unk", "Translation.replace_unk"),
        ("rnnsearch.engine.accel.quantize.quantize_int8_", "quantize_int8_"),
    ]),
    ("Training", [
        ("rnnsearch.config.load_config", "load_config"),
        ("rnnsearch.config.config_from_dict", "config_from_dict"),
        ("rnnsearch.config.Config", "Config"),
        ("rnnsearch.train", "train"),
        ("rnnsearch.engine.data.prepared.prepare_or_load", "prepare_or_load"),
    ]),
    ("The models (paper Appendix A)", [
        ("rnnsearch.nn.model.build_model", "build_model"),
        ("rnnsearch.nn.model.RNNsearch", "RNNsearch"),
        ("rnnsearch.nn.model.RNNsearch.encode", "RNNsearch.encode"),
        ("rnnsearch.nn.model.RNNsearch.context", "RNNsearch.context"),
        ("rnnsearch.nn.model.RNNsearch.forward", "RNNsearch.forward"),
        ("rnnsearch.nn.model.RNNsearch.step", "RNNsearch.step"),
        ("rnnsearch.nn.model.RNNencdec", "RNNencdec"),
        ("rnnsearch.nn.model.Encoded", "Encoded"),
        ("rnnsearch.nn.gru.GRU", "GRU"),
    ]),
    ("Attention and its score functions", [
        ("rnnsearch.nn.attention", "rnnsearch.nn.attention"),
        ("rnnsearch.nn.attention.Attention", "Attention"),
        ("rnnsearch.nn.attention.Attention.scores", "Attention.scores"),
        ("rnnsearch.nn.attention.Attention.forward", "Attention.forward"),
    ]),
    ("Search", [
        ("rnnsearch.nn.search.beam_search", "beam_search"),
        ("rnnsearch.engine.accel.inflight.search_stream", "search_stream"),
    ]),
    ("Scoring and alignment", [
        ("rnnsearch.engine.decode.evaluate.score_corpus", "score_corpus"),
        ("rnnsearch.engine.decode.evaluate.bleu_by_length", "bleu_by_length"),
        ("rnnsearch.engine.align.links.argmax_links", "argmax_links"),
        ("rnnsearch.engine.align.links.aer", "aer"),
        ("rnnsearch.engine.align.links.content_word_accuracy", "content_word_accuracy"),
        ("rnnsearch.engine.align.links.word_attention", "word_attention"),
        ("rnnsearch.engine.align.links.attention_links", "attention_links"),
        ("rnnsearch.engine.align.links.symmetrize", "symmetrize"),
        ("rnnsearch.engine.align.links.read_lexicon", "read_lexicon"),
        ("rnnsearch.engine.align.eflomal.align_config", "align_config"),
        ("rnnsearch.engine.decode.markup.translate_markup", "translate_markup"),
    ]),
    ("Figures", [
        ("rnnsearch.tools.plotting.plot_attention", "plot_attention"),
        ("rnnsearch.tools.explorer.write_explorer", "write_explorer"),
        ("rnnsearch.tools.figures.untrained_attention", "untrained_attention"),
    ]),
    ("Data and experiments", [
        ("rnnsearch.tools.download.get", "download.get"),
        ("rnnsearch.tools.download.split", "download.split"),
        ("rnnsearch.tools.demo.run_demo", "run_demo"),
        ("rnnsearch.tools.experiments.run_experiments", "run_experiments"),
        ("rnnsearch.nn.reference.forward", "reference.forward"),
    ]),
]


def resolve(path: str):
    parts = path.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ModuleNotFoundError:
            continue
        for attr in parts[k:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(path)


def anchor(name: str) -> str:
    """The GitHub-style anchor of a heading `name` (backticks dropped, lowercased, dots removed)."""
    return re.sub(r"[^a-z0-9_ -]", "", name.lower()).replace(" ", "-")


def signature(obj, name: str) -> str:
    """The call as a reader writes it: parameter names and defaults, and what it returns (the
    parameters' types are in the definition the entry links)."""
    if inspect.ismodule(obj):
        return ""
    target = obj.__init__ if inspect.isclass(obj) and "__init__" in vars(obj) else obj
    try:
        full = inspect.signature(target)
    except (TypeError, ValueError):
        return ""
    bare = [p.replace(annotation=inspect.Parameter.empty) for p in full.parameters.values()]
    sig = re.sub(r"^\(self(, )?", "(", str(full.replace(parameters=bare)))
    return f"```python\n{name}{sig}\n```\n"


FIELD = re.compile(r"^    (\w+): ([^=]+?)(?: = (.+?))?(?:\s+#\s*(.*))?$")
COMMENT = re.compile(r"^    #\s*(.*)$")


def spelled(tp: str, config) -> str:
    """A key's type as its values: an alias that config.py defines once for several places
    (``TrainPrecision``) written out as the Literal it is."""
    def values(m: re.Match) -> str:
        alias = getattr(config, m.group(0), None)
        if typing.get_origin(alias) is not typing.Literal:
            return m.group(0)
        return "Literal[" + ", ".join(f'"{v}"' for v in typing.get_args(alias)) + "]"

    return re.sub(r"\b[A-Z]\w*\b", values, tp)


def config_keys() -> list[str]:
    """One table per config section, read from the dataclasses' source: key, type, default, comment.

    A key's comment is the one at the end of its line or, where there is none (the line would be too
    long), the comment lines right above it."""
    from rnnsearch import config

    lines = ["## Configuration keys", "",
             "Every key of a run's YAML file, by section (`--set section.key=value` overrides one). "
             "Read from `src/rnnsearch/config.py`, where each is defined.", ""]
    for section, cls in (("data", config.DataConfig), ("vocab", config.VocabConfig),
                         ("model", config.ModelConfig), ("train", config.TrainConfig),
                         ("decode", config.DecodeConfig)):
        lines += [f"### {section} keys", "", "| key | type | default | meaning |", "|---|---|---|---|"]
        source, _ = inspect.getsourcelines(cls)
        names = {f.name for f in dataclasses.fields(cls)}
        seen = set()
        above: list[str] = []  # the comment lines right above the current line
        for raw in source:
            c = COMMENT.match(raw.rstrip())
            if c:
                above.append(c.group(1))
                continue
            m = FIELD.match(raw.rstrip())
            comment_above, above = " ".join(above), []
            if not m or m.group(1) not in names:
                continue
            key, tp, default, note = m.groups()
            note = note or comment_above
            seen.add(key)
            tp = spelled(tp.strip(), config).replace("|", "\\|")
            default = (default or "").replace("|", "\\|")
            lines.append(f"| `{key}` | `{tp}` | `{default}` | {(note or '').replace('|', '/')} |")
        missing = names - seen
        if missing:
            raise SystemExit(f"{cls.__name__}: could not read {sorted(missing)} from the source")
        lines.append("")
    return lines


def markdown(doc: str, link) -> str:
    """Docstring -> Markdown: prose paragraphs with links; aligned or indented blocks kept verbatim."""
    out = []
    for block in re.split(r"\n\s*\n", doc):
        rows = block.splitlines()
        if any(r.startswith(" ") or re.search(r"\S {2,}\S", r) or r.lstrip().startswith(">>>") for r in rows):
            out.append("```text\n" + "\n".join(r.rstrip() for r in rows) + "\n```")
        else:
            out.append(re.sub(r"(?<![\[`])`([A-Za-z_][\w.]*(?:\(\))?)`(?!\])", link, block))
    return "\n\n".join(out)


def summary(doc: str) -> str:
    """The docstring's first paragraph: what the entry is for. The rest (arguments, edge cases,
    measurements) is read where the entry's "defined in" link points, so it is not said twice."""
    return re.split(r"\n\s*\n", doc, maxsplit=1)[0]


def render() -> str:
    names = {name for _, entries in API for _, name in entries}
    lines = ["# API reference", "",
             "Generated from the docstrings by `python docs/make_api.py`: each entry's signature (types "
             "aside) and the first paragraph of its docstring; the rest is in the file it links. "
             "The command line (`rnnsearch --help`, `rnnsearch COMMAND --help`) wraps these functions.", ""]
    lines += ["Contents:", ""]
    for section, entries in API:
        lines.append(f"- **{section}**: " + ", ".join(f"[`{n}`](#{anchor(n)})" for _, n in entries))
    lines += ["- [**Configuration keys**](#configuration-keys): "
              + ", ".join(f"[{k}](#{k}-keys)" for k in ("data", "vocab", "model", "train", "decode")), ""]

    def link(match: re.Match) -> str:
        name = match.group(1)
        bare = name.removesuffix("()")
        return f"[`{name}`](#{anchor(bare)})" if bare in names else match.group(0)

    for section, entries in API:
        lines += [f"## {section}", ""]
        for path, name in entries:
            obj = inspect.unwrap(resolve(path))
            doc = inspect.getdoc(obj) if not inspect.isclass(obj) or vars(obj).get("__doc__") else None
            if not doc:
                raise SystemExit(f"{path}: no docstring — document it before it is listed in the API")
            where = inspect.getsourcefile(obj)
            rel = Path(where).resolve().relative_to(Path(__file__).resolve().parents[1])
            lines += [f"### {name}", "", f"<sub>defined in [{rel}](../{rel})</sub>", ""]
            sig = signature(obj, name)
            if sig:
                lines += [sig]
            doc = re.sub(r":(?:meth|func|class|attr):", "", doc)  # Sphinx roles read as plain code here
            lines += [markdown(summary(doc), link), ""]
    lines += config_keys()
    return "\n".join(lines).rstrip() + "\n"


CODE_LINK = re.compile(r"\[`([\w.]+)`\]\(\.\./src/rnnsearch/([\w/]+)\.py#L(\d+)-L(\d+)\)")
GUIDES = ("guide.md", "guide.zh-CN.md")


def code_lines(module: str, name: str) -> tuple[int, int]:
    """First and last source line of `name` (Class.method or function) in rnnsearch.`module`
    (a path below src/rnnsearch such as ``nn/model``)."""
    dotted = module.replace("/", ".")
    name = name.removeprefix(dotted.rsplit(".", 1)[-1] + ".")
    obj = inspect.unwrap(resolve(f"rnnsearch.{dotted}.{name}"))
    source, first = inspect.getsourcelines(obj)
    return first, first + len(source) - 1


def refresh_code_links(text: str) -> str:
    """Rewrite every [`name`](../src/rnnsearch/mod.py#La-Lb) link so a..b are name's lines today."""
    def fix(m: re.Match) -> str:
        first, last = code_lines(m.group(2), m.group(1))
        return f"[`{m.group(1)}`](../src/rnnsearch/{m.group(2)}.py#L{first}-L{last})"

    return CODE_LINK.sub(fix, text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    args = ap.parse_args()
    here = Path(__file__).parent
    wanted = {here / "api.md": render()}
    for name in GUIDES:
        if (here / name).exists():
            wanted[here / name] = refresh_code_links((here / name).read_text(encoding="utf-8"))
    stale = [p for p, text in wanted.items() if not p.exists() or p.read_text(encoding="utf-8") != text]
    if args.check:
        for p in stale:
            print(f"{p} is stale: run python docs/make_api.py", file=sys.stderr)
        return 1 if stale else 0
    for p in stale:
        p.write_text(wanted[p], encoding="utf-8")
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
