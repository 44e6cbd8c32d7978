"""Bad input through the command line itself (Hypothesis): `rnnsearch train` on corpora of random
bytes and `rnnsearch translate` on input files of random bytes, run through the CLI's own entry
point as a user's shell would. Each must exit 0 with a result or exit 2 with one line
"rnnsearch: error: ..." naming the file, never a traceback, and a refused training leaves no model
directory behind.

Training is the costly part (a vocabulary and one step each), so the CI budget here is a fifth of
RNNSEARCH_FUZZ_EXAMPLES (at least 20); RNNSEARCH_FUZZ_RANDOM=1 draws new examples
(docs/robustness.md)."""

from __future__ import annotations

import contextlib
import io
import json
import os

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="pip install -e '.[test]'")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from rnnsearch.cli import main  # noqa: E402

EXAMPLES = max(20, int(os.environ.get("RNNSEARCH_FUZZ_EXAMPLES", "150")) // 5)
RANDOM = os.environ.get("RNNSEARCH_FUZZ_RANDOM") == "1"
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=not RANDOM,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

line = (st.binary(max_size=30) | st.text(max_size=30).map(lambda s: s.encode("utf-8", "surrogatepass"))
        | st.sampled_from([b"a b c", b"\x00", b"\r", b"x\ty", b"\xff\xfe", "你好".encode(), b" "]))
corpus = st.lists(line, max_size=12).map(lambda lines: b"\n".join(lines))


def run_cli(argv: list[str]) -> tuple[int, str]:
    """main(argv) as the shell runs it: its exit status and what it wrote to stderr."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as e:  # argparse
            code = e.code if isinstance(e.code, int) else 1
    return code, err.getvalue()


def write_config(tmp, src, tgt, vocab: str = "word", steps: int = 1, prepared: bool = True):
    """A tiny training config over the two corpus files, written to tmp/config.json."""
    config = {"preset": "tiny", "data": {"train_src": str(src), "train_tgt": str(tgt), "prepared": prepared},
              "vocab": {"kind": vocab, "size": 40}, "model": {"emb": 8, "hidden": 8, "align": 8, "maxout": 8},
              "train": {"max_steps": steps, "batch_size": 4, "valid_every": 0, "progress": False,
                        "threads": 1}}
    (tmp / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return tmp / "config.json"


def assert_clean_exit(code: int, err: str, *files) -> None:
    assert "Traceback" not in err, err
    assert code in (0, 2), (code, err)
    if code == 2:
        error = [x for x in err.splitlines() if x.startswith("rnnsearch: error:")]
        assert len(error) == 1, err
        assert any(str(f) in error[0] for f in files), error[0]


@FUZZ
@given(src=corpus, tgt=corpus, vocab=st.sampled_from(["word", "bpe"]))
def test_train_on_a_corpus_of_random_bytes_trains_or_exits_2_naming_the_file(tmp_path_factory, src, tgt,
                                                                              vocab):
    tmp = tmp_path_factory.mktemp("fuzz")
    paths = {}
    for name, data in (("train.src", src), ("train.tgt", tgt)):
        paths[name] = tmp / name
        paths[name].write_bytes(data)
    config = write_config(tmp, paths["train.src"], paths["train.tgt"], vocab, prepared=False)
    model_dir = tmp / "run"
    code, err = run_cli(["train", str(config), "--model-dir", str(model_dir)])
    assert_clean_exit(code, err, *paths.values())
    if code == 2:
        assert not model_dir.exists()  # a refused start leaves nothing behind
    else:
        assert (model_dir / "model.safetensors").exists()


@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("model")
    (tmp / "s").write_text("a b c\nb c d\nc d e\n" * 4, encoding="utf-8")
    (tmp / "t").write_text("x y z\ny z w\nz w v\n" * 4, encoding="utf-8")
    config = write_config(tmp, tmp / "s", tmp / "t", steps=2)
    assert run_cli(["train", str(config), "--model-dir", str(tmp / "run")])[0] == 0
    return tmp / "run"


@FUZZ
@given(text=corpus, extra=st.sampled_from([[], ["--alignment"], ["--format", "html"], ["--beam", "1"]]))
def test_translate_random_bytes_translates_or_exits_2_naming_the_file(tmp_path_factory, small_model, text,
                                                                       extra):
    tmp = tmp_path_factory.mktemp("in")
    path, out = tmp / "input.txt", tmp / "out.txt"
    path.write_bytes(text)
    code, err = run_cli(["translate", "--model", str(small_model), "--input", str(path), "--output", str(out),
                         *extra])
    assert_clean_exit(code, err, path)
    if code == 0:
        lines_in = text.count(b"\n") + (1 if text and not text.endswith(b"\n") else 0)
        assert out.read_bytes().count(b"\n") == lines_in  # a line out for every line in


def test_the_cli_fuzz_reaches_both_outcomes(tmp_path_factory):
    """The same calls on a plain corpus train, and on invalid UTF-8 exit 2 naming file and line."""
    outcomes = []
    for src in (b"a b c\nb c\n", b"a b c\n\xff\xfe\n"):
        tmp = tmp_path_factory.mktemp("both")
        (tmp / "s").write_bytes(src)
        (tmp / "t").write_bytes(b"x y\ny z\n")
        config = write_config(tmp, tmp / "s", tmp / "t")
        outcomes.append(run_cli(["train", str(config), "--model-dir", str(tmp / "run")]))
    assert outcomes[0][0] == 0
    assert outcomes[1][0] == 2 and f"{tmp / 's'}:2" in outcomes[1][1] and "UTF-8" in outcomes[1][1]


def test_a_corpus_with_no_text_on_one_side_names_that_file(tmp_path):
    """Found by the fuzz: a target side of nothing but blank lines and NUL ended in sentencepiece's
    'no text' without naming the file."""
    (tmp_path / "s").write_bytes(b"a b\n")
    (tmp_path / "t").write_bytes(b"\x00\n")
    code, err = run_cli(["train", str(write_config(tmp_path, tmp_path / "s", tmp_path / "t", "bpe")),
                         "--model-dir", str(tmp_path / "run")])
    assert code == 2 and f"{tmp_path / 't'}: no target text to build a vocabulary from" in err
    assert not (tmp_path / "run").exists()
