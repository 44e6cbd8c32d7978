"""Every bad input a user can produce, end to end through the command line.

Each case asserts the one-line message (file, line, problem) and that nothing was lost or
left half-written: no model directory from a failed start, no partial output file, an
existing file untouched, and one output line per input line at translation.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from rnnsearch.cli import main
from rnnsearch.config import load_config

WORDS = "the a cat dog sees likes small big red house tree".split()


def _corpus(tmp: Path, n: int = 300) -> tuple[Path, Path]:
    import random

    rng = random.Random(0)
    src, tgt = [], []
    for _ in range(n):
        sent = [rng.choice(WORDS) for _ in range(rng.randint(2, 6))]
        src.append(" ".join(sent))
        tgt.append(" ".join(w.upper() for w in reversed(sent)))
    (tmp / "train.src").write_text("\n".join(src) + "\n", encoding="utf-8")
    (tmp / "train.tgt").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    return tmp / "train.src", tmp / "train.tgt"


def _config(tmp: Path, src: Path, tgt: Path, model_dir: Path, vocab: str = "word", extra: str = "") -> Path:
    size = 40 if vocab == "word" else 300
    fallback = "true" if vocab == "bpe" else "false"
    cfg = tmp / f"{model_dir.name}.yaml"
    cfg.write_text(f"""preset: tiny
model_dir: {model_dir}
data: {{train_src: {src}, train_tgt: {tgt}, max_len: 20}}
vocab: {{kind: {vocab}, size: {size}, byte_fallback: {fallback}}}
model: {{emb: 16, hidden: 16, align: 16, maxout: 16}}
train: {{max_epochs: 1, progress: false, tensorboard: false, threads: 1}}
decode: {{beam: 2, max_source_len: 12}}
{extra}""", encoding="utf-8")
    return cfg


def _fails(capsys, argv: list[str], *needles: str) -> str:
    assert main(argv) == 2
    text = capsys.readouterr().err.strip()
    assert "Traceback" not in text
    err = text.splitlines()[-1]  # progress lines may come first; the error is one line, last
    assert err.startswith("rnnsearch: error: "), text
    for needle in needles:
        assert needle in err, f"{needle!r} not in {err!r}"
    return err


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A word-vocabulary model and a sentencepiece model with byte fallback, trained for one epoch."""
    tmp = tmp_path_factory.mktemp("bad_input")
    src, tgt = _corpus(tmp)
    out = {}
    for kind in ("word", "bpe"):
        model_dir = tmp / f"model_{kind}"
        assert main(["train", str(_config(tmp, src, tgt, model_dir, vocab=kind))]) == 0
        out[kind] = model_dir
    return out


# -- training data -----------------------------------------------------------------------------------

def test_different_line_counts(tmp_path, capsys):
    src, tgt = _corpus(tmp_path)
    tgt.write_text("\n".join(tgt.read_text().splitlines()[:-3]) + "\n")
    model_dir = tmp_path / "m"
    _fails(capsys, ["train", str(_config(tmp_path, src, tgt, model_dir))],
           str(src), str(tgt), "300 lines", "297 lines")
    assert not model_dir.exists()


def test_invalid_utf8_names_the_line(tmp_path, capsys):
    src, tgt = _corpus(tmp_path)
    lines = tgt.read_bytes().split(b"\n")
    lines[41] = b"CAT \xff\xfe HOUSE"
    tgt.write_bytes(b"\n".join(lines))
    model_dir = tmp_path / "m"
    _fails(capsys, ["train", str(_config(tmp_path, src, tgt, model_dir))], f"{tgt}:42: invalid UTF-8")
    assert not model_dir.exists()


def test_empty_and_missing_files(tmp_path, capsys):
    src, tgt = _corpus(tmp_path)
    tgt.write_bytes(b"")
    _fails(capsys, ["train", str(_config(tmp_path, src, tgt, tmp_path / "m"))], f"{tgt}: file is empty")
    _fails(capsys, ["train", str(_config(tmp_path, src, tmp_path / "nope.tgt", tmp_path / "m"))],
           f"{tmp_path / 'nope.tgt'}: no such file")
    assert not (tmp_path / "m").exists()


def test_blank_huge_and_control_character_lines_are_dropped_or_cleaned(tmp_path, capsys):
    src, tgt = _corpus(tmp_path)
    s, t = src.read_text().splitlines(), tgt.read_text().splitlines()
    s[3], t[3] = "", ""  # blank pair
    s[5] = "cat " * 25_000  # a 100k-character line
    t[7] = "CAT\x00\u200b DOG\x07\tHOUSE"  # NUL, zero-width space, BEL, tab
    src.write_text("\n".join(s) + "\n")
    tgt.write_text("\n".join(t) + "\n")
    model_dir = tmp_path / "m"
    assert main(["train", str(_config(tmp_path, src, tgt, model_dir))]) == 0
    err = capsys.readouterr().err
    assert "298 pairs kept, 1 blank and 1 over 20 tokens dropped" in err, err
    words = set((model_dir / "tgt.vocab.txt").read_text(encoding="utf-8").split())
    assert "CAT" in words and not any("\x00" in w or "\x07" in w or "\u200b" in w for w in words)


def test_sentencepiece_vocabulary_too_small(tmp_path, capsys):
    src, tgt = _corpus(tmp_path)
    cfg = _config(tmp_path, src, tgt, tmp_path / "m", vocab="bpe")
    _fails(capsys, ["train", str(cfg), "--set", "vocab.size=60"],
           "vocab: sentencepiece cannot build a bpe vocabulary of size 60", "byte_fallback adds 256")
    assert not (tmp_path / "m").exists()


def test_all_pairs_dropped_leaves_no_model_directory(tmp_path, capsys):
    src, tgt = tmp_path / "s", tmp_path / "t"
    src.write_text("a b c\n\n")
    tgt.write_text("\nx y\n")
    model_dir = tmp_path / "m"
    _fails(capsys, ["train", str(_config(tmp_path, src, tgt, model_dir))],
           f"train ({src}, {tgt}): no pairs left after dropping 2 blank")
    assert not model_dir.exists()


# -- configuration -----------------------------------------------------------------------------------

@pytest.mark.parametrize("extra, needles", [
    ("optimiser: adam\n", ["unknown key 'optimiser'"]),
    ("train2: {lr: 1}\n", ["unknown key 'train2' (did you mean 'train'?)"]),
])
def test_config_unknown_keys(tmp_path, capsys, extra, needles):
    src, tgt = _corpus(tmp_path)
    _fails(capsys, ["train", str(_config(tmp_path, src, tgt, tmp_path / "m", extra=extra))], *needles)
    assert not (tmp_path / "m").exists()


def test_config_wrong_types(tmp_path, capsys):
    src, tgt = _corpus(tmp_path)
    cfg = _config(tmp_path, src, tgt, tmp_path / "m")
    cfg.write_text(cfg.read_text().replace("hidden: 16", "hidden: sixteen"))
    _fails(capsys, ["train", str(cfg)], str(cfg), "model.hidden", "int")
    _fails(capsys, ["train", str(_config(tmp_path, src, tgt, tmp_path / "m")), "--set", "train.lr=fast"],
           "train.lr")
    assert not (tmp_path / "m").exists()


def test_existing_run_is_never_overwritten(models, tmp_path, capsys):
    model_dir = tmp_path / "copy"
    shutil.copytree(models["word"], model_dir)
    before = {p.name: p.read_bytes() for p in model_dir.iterdir() if p.is_file()}
    cfg = json.loads((model_dir / "config.json").read_text())
    yaml = tmp_path / "again.yaml"
    yaml.write_text(json.dumps(dict(cfg, model_dir=str(model_dir))))
    _fails(capsys, ["train", str(yaml)], "already holds a training run", "--resume")
    assert {p.name: p.read_bytes() for p in model_dir.iterdir() if p.is_file()} == before


# -- the model directory -----------------------------------------------------------------------------

def test_vocabulary_that_does_not_match_the_model(models, tmp_path, capsys):
    model_dir = tmp_path / "swapped"
    shutil.copytree(models["word"], model_dir)
    vocab = model_dir / "src.vocab.txt"
    vocab.write_text("\n".join(vocab.read_text(encoding="utf-8").splitlines()[:-2]) + "\n", encoding="utf-8")
    _fails(capsys, ["translate", "--model", str(model_dir)], "not the vocabulary this model was trained with",
           "src_emb.weight")


def test_truncated_weights(models, tmp_path, capsys):
    model_dir = tmp_path / "cut"
    shutil.copytree(models["word"], model_dir)
    weights = model_dir / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    _fails(capsys, ["translate", "--model", str(model_dir)], f"{weights}: not a readable safetensors file")


def _future_key(d):
    cfg = json.loads((d / "config.json").read_text())
    cfg["model"]["flux_capacitor"] = True  # a key of a later version
    (d / "config.json").write_text(json.dumps(cfg))


def test_config_nested_deeper_than_the_parser_goes(tmp_path, capsys):
    deep = tmp_path / "deep.yaml"
    deep.write_text("model: " + "[" * 50_000 + "]" * 50_000 + "\n")  # a RecursionError in PyYAML
    _fails(capsys, ["train", str(deep)], str(deep), "invalid YAML (nested too deeply)")
    deep_json = tmp_path / "deep.json"
    deep_json.write_text('{"model": ' + "[" * 50_000 + "]" * 50_000 + "}")
    _fails(capsys, ["train", str(deep_json)], str(deep_json), "nested too deeply")
    src, tgt = _corpus(tmp_path)  # a --set value that deep is taken as the string it is
    _fails(capsys, ["train", str(_config(tmp_path, src, tgt, tmp_path / "m")), "--set",
                    "model.hidden=" + "[" * 50_000], "model.hidden")
    assert not (tmp_path / "m").exists()


def test_yaml_aliases_that_expand_to_billions_or_to_themselves_are_refused(tmp_path, capsys):
    """A billion laughs: nine aliases of nine aliases, 9^10 values from 200 bytes. It is measured
    on the parsed nodes, never built; a few shared anchors, as people use them, still load."""
    levels = ['&a ["x","x","x","x","x","x","x","x","x"]']
    for prev, name in zip("abcdefghi", "bcdefghij"):
        levels.append(f"&{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("model:\n  emb: [" + ", ".join(levels) + "]\n")
    _fails(capsys, ["train", str(bomb)], str(bomb), "its aliases expand to more than 100,000 values")
    loop = tmp_path / "loop.yaml"
    loop.write_text("model:\n  emb: &a [1, *a]\n")
    _fails(capsys, ["train", str(loop)], str(loop), "an alias refers to a node that contains it")
    long = tmp_path / "long.yaml"  # a wrong value a megabyte long is shown cut short
    long.write_text("model:\n  score: " + "x" * 1_000_000 + "\n")
    err = _fails(capsys, ["train", str(long)], "model.score: expected one of")
    assert len(err) < 400
    src, tgt = _corpus(tmp_path)
    shared = _config(tmp_path, src, tgt, tmp_path / "m")
    shared.write_text(shared.read_text().replace("emb: 16, hidden: 16", "emb: &n 24, hidden: *n"))
    cfg = load_config(shared)
    assert (cfg.model.emb, cfg.model.hidden) == (24, 24)


def _deep_config(model_dir: Path) -> None:
    (model_dir / "config.json").write_text('{"model": ' + "[" * 50_000 + "]" * 50_000 + "}")


@pytest.mark.parametrize("damage, needles", [
    (lambda d: (d / "model.safetensors").unlink(), ["model.safetensors: no such weights file"]),
    (_future_key, ["config.json: unknown key 'model.flux_capacitor'"]),
    (_deep_config, ["config.json: not valid JSON (nested too deeply"]),
], ids=["no-weights", "future-key", "deep-config"])
def test_a_damaged_model_directory_is_named_in_one_line(models, tmp_path, capsys, damage, needles):
    model_dir = tmp_path / "damaged"
    shutil.copytree(models["word"], model_dir)
    damage(model_dir)
    _fails(capsys, ["translate", "--model", str(model_dir)], str(model_dir), *needles)


# -- translation -------------------------------------------------------------------------------------

ODD = ["the cat sees 🐈 and 🏠", "مرحبا بالعالم", "e\u0301\u0301 cafe\u0301", "dog\x00house",
       "漢字 かな 한글", "\u202eredro txet\u202c", "", "   ", "the " * 400]


@pytest.mark.parametrize("kind", ["word", "bpe"])
def test_unknown_characters_and_empty_lines_never_crash(models, tmp_path, capsys, kind):
    inp = tmp_path / "in.txt"
    inp.write_text("\n".join(ODD) + "\n", encoding="utf-8")
    out, att = tmp_path / "out.txt", tmp_path / "att.jsonl"
    assert main(["translate", "--model", str(models[kind]), "--input", str(inp), "--output", str(out),
                 "--attention", str(att), "--beam", "2"]) == 0
    lines = out.read_text(encoding="utf-8").split("\n")
    assert len(lines) == len(ODD) + 1 and lines[-1] == ""
    assert lines[6] == "" and lines[7] == ""  # empty and blank lines give empty lines
    records = [json.loads(x) for x in att.read_text(encoding="utf-8").splitlines()]
    assert len(records) == len(ODD)
    long = records[8]  # 400 words, decoded in pieces of 12 tokens: attention is block-diagonal
    assert len(long["source"]) >= 400
    for row in long["weights"]:
        assert abs(sum(row) - 1) < 1e-4
    if kind == "bpe":  # byte fallback: the emoji is spelled out in byte pieces, not UNK
        assert any(p.startswith("<0x") for p in records[0]["source"])


def test_a_100k_character_line_is_translated_in_pieces(models, tmp_path):
    from rnnsearch.engine.decode.loading import load

    model = load(models["bpe"], device="cpu")
    start = time.time()
    text = "the big red house " * 5500  # ~100k characters
    result = model.translate(["a cat", text, ""], beam=1)  # its attention (~10^9 weights) is not kept
    assert time.time() - start < 60
    assert len(result) == 3 and result[1].text and result[2].text == ""
    assert len(result[1].source_tokens) == len(model.src_tok.encode(text))
    assert result[1].attention is None and result[0].attention is not None


def test_invalid_input_leaves_an_existing_output_untouched(models, tmp_path, capsys):
    inp = tmp_path / "in.txt"
    inp.write_bytes(b"the cat\nthe \xc3\x28 dog\n")
    out = tmp_path / "out.txt"
    out.write_text("precious earlier output\n")
    _fails(capsys, ["translate", "--model", str(models["word"]), "--input", str(inp), "--output", str(out)],
           f"{inp}:2: invalid UTF-8")
    assert out.read_text() == "precious earlier output\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out.txt"]  # no temporary files left


def test_translate_options_out_of_range(models, tmp_path, capsys):
    out = tmp_path / "out.txt"
    _fails(capsys, ["translate", "--model", str(models["word"]), "--beam", "2", "--n-best", "3",
                    "--input", str(tmp_path / "never-read.txt"), "--output", str(out)],
           "--n-best: must be in 1..beam (2), got 3")
    _fails(capsys, ["translate", "--model", str(models["word"]), "--beam", "0", "--input", "x"],
           "--beam: must be in 1..256, got 0")
    assert not out.exists()
