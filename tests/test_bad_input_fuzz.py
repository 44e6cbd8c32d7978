"""Bad input by the hundred (Hypothesis): config files of any shape, `--set` strings, corpora of
random bytes. Each ends in a result or in the project's own error naming the input (ConfigError,
DataError), never another exception.

The example budget is RNNSEARCH_FUZZ_EXAMPLES (default 150, the CI's, the same examples each run);
RNNSEARCH_FUZZ_RANDOM=1 draws new ones (docs/robustness.md)."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="pip install -e '.[test]'")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from rnnsearch.config import ConfigError, config_from_dict, load_config  # noqa: E402
from rnnsearch.engine.data.parallel import read_parallel  # noqa: E402
from rnnsearch.io import DataError  # noqa: E402

EXAMPLES = int(os.environ.get("RNNSEARCH_FUZZ_EXAMPLES", "150"))
RANDOM = os.environ.get("RNNSEARCH_FUZZ_RANDOM") == "1"  # new examples each run (else CI's fixed ones)
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=not RANDOM,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
SECTIONS = ["data", "vocab", "model", "train", "decode", "preset", "model_dir", "bogus"]
KEYS = ["max_len", "size", "kind", "hidden", "emb", "score", "lr", "batch_size", "max_steps", "beam",
        "guided_alignment", "alignment_head", "precision", "threads", "dropout_emb", "nope"]
scalars = (st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats()
           | st.text(max_size=20) | st.sampled_from(["bpe", "word", "auto", "1e-3", "inf", "nan"]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.sampled_from(KEYS), inner, max_size=4), max_leaves=12)
sections = st.dictionaries(st.sampled_from(KEYS), values, max_size=4) | values
configs = st.dictionaries(st.sampled_from(SECTIONS), sections, max_size=5)
yaml_texts = st.text(max_size=200) | st.sampled_from([
    "a: &x [*x]", "model: {hidden: &h 3, emb: *h}", "!!python/object:os.system 'true'", "train:\n\t- x",
    "data: [1, 2", "---\n---\n", "model:\n  hidden: 1e400", "a: " + "[" * 200, "? [a]\n: b"])


@FUZZ
@given(raw=configs)
def test_a_config_of_any_shape_is_loaded_or_refused_with_a_config_error(raw):
    try:
        config_from_dict(raw)
    except ConfigError as e:
        assert str(e)  # a message naming the key


@FUZZ
@given(text=yaml_texts)
def test_a_config_file_of_any_text_is_loaded_or_refused_naming_the_file(tmp_path, text):
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        load_config(path)
    except ConfigError as e:
        assert str(path) in str(e)
    except UnicodeEncodeError:
        pass  # the text could not be written as UTF-8: nothing was tested


@FUZZ
@given(overrides=st.lists(st.text(max_size=30) | st.builds(
    lambda s, k, v: f"{s}.{k}={v}", st.sampled_from(SECTIONS), st.sampled_from(KEYS), st.text(max_size=12)),
    max_size=3))
def test_set_strings_are_applied_or_refused_with_a_config_error(overrides):
    try:
        config_from_dict({}, overrides, source="--set")
    except ConfigError as e:
        assert str(e)


corpus_lines = st.lists(st.binary(max_size=40) | st.text(max_size=40).map(
    lambda s: s.encode("utf-8", "surrogatepass")) | st.sampled_from([b"\x00", b"\r", b"a\tb", b"\xff\xfe"]),
    max_size=8)


@FUZZ
@given(src=corpus_lines, tgt=corpus_lines, gz=st.booleans(), cut=st.integers(0, 30))
def test_a_corpus_of_random_bytes_is_read_or_refused_naming_the_file(tmp_path, src, tgt, gz, cut):
    """Unequal line counts, invalid UTF-8, NUL, CR, tabs, empty files, truncated gzip."""
    paths = []
    for side, lines in (("src", src), ("tgt", tgt)):
        data = b"\n".join(lines)
        path = tmp_path / (f"{side}.gz" if gz else side)
        if gz:
            data = gzip.compress(data)
            data = data[:len(data) - cut] if cut else data  # a download cut short
        path.write_bytes(data)
        paths.append(path)
    try:
        sources, targets = read_parallel(*paths)
    except DataError as e:
        assert any(str(p) in str(e) for p in paths), str(e)
    else:
        assert len(sources) == len(targets)
        assert all(isinstance(s, str) for s in sources + targets)


def test_the_fuzz_inputs_reach_both_outcomes(tmp_path):
    """The generators are not all refused: a plain config and corpus pass through the same calls."""
    config_from_dict({"model": {"hidden": 8}})
    (tmp_path / "s").write_text("a b\n", encoding="utf-8")
    (tmp_path / "t").write_text("c d\n", encoding="utf-8")
    assert read_parallel(Path(tmp_path / "s"), Path(tmp_path / "t")) == (["a b"], ["c d"])
