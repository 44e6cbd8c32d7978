"""Training from prepared corpora: `rnnsearch data prepare` (or the first `train`) encodes the
corpus once; later runs reuse it, a changed option prepares again, and the memory-mapped pairs
train exactly the weights the in-memory pairs train."""

import json
import logging

import pytest
import torch
from conftest import toy_config
from safetensors.torch import load_file

from rnnsearch.cli import main
from rnnsearch.config import ConfigError
from rnnsearch.engine.data.pairs import prepare
from rnnsearch.engine.train.trainer import train


def prepared_dirs(model_dir):
    return sorted(p for p in (model_dir / "prepared").iterdir() if not p.name.startswith("."))


def test_prepare_then_train_reuses_the_vocabularies_and_the_arrays(tmp_path, capsys):
    cfg = toy_config(tmp_path, "run", max_steps=4, max_epochs=0, log_every=1)
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg.to_dict()))
    assert main(["data", "prepare", str(path)]) == 0
    run = tmp_path / "run"
    (prepared,) = prepared_dirs(run)
    assert str(prepared) in capsys.readouterr().out
    def made():  # the vocabularies' bytes; the arrays are not even written again
        return ({p.name: p.read_bytes() for p in run.glob("*.vocab.txt")},
                {p.name: p.stat().st_mtime_ns for p in prepared.iterdir()})

    before = made()
    assert len(before[0]) == 2 and len(before[1]) == 6  # five arrays and meta.json
    assert main(["train", str(path)]) == 0  # the command line logs to stderr
    err = capsys.readouterr().err
    assert "using the vocabularies already in" in err and "reusing prepared" in err and "building" not in err
    assert made() == before
    assert main(["train", "--resume", str(run), "--set", "train.max_steps=6"]) == 0
    assert "reusing prepared" in capsys.readouterr().err and prepared_dirs(run) == [prepared]
    # data prepare beside a run: that run's vocabularies, the same arrays
    assert main(["data", "prepare", str(path)]) == 0 and prepared_dirs(run) == [prepared]


def test_a_changed_encoding_option_prepares_again(tmp_path):
    cfg = toy_config(tmp_path, "run")
    first = prepare(cfg)
    cfg.data.max_len = 6
    second = prepare(cfg)
    assert second.path != first.path and len(prepared_dirs(tmp_path / "run")) == 2
    assert len(second) < len(first) and second.dropped_long > first.dropped_long
    assert int(second.tgt_lengths.max()) <= 6


def test_prepare_needs_a_training_corpus(tmp_path):
    cfg = toy_config(tmp_path, "run")
    cfg.data.train_src = cfg.data.train_tgt = None
    with pytest.raises(ConfigError, match="train_src"):
        prepare(cfg)
    assert main(["data", "prepare"]) == 2


@pytest.mark.parametrize("word_dropout", [0.0, 0.2])
def test_memory_mapped_pairs_train_the_weights_in_memory_pairs_train(tmp_path, word_dropout):
    weights = []
    for prepared in (True, False):
        cfg = toy_config(tmp_path, f"prepared-{prepared}", max_steps=12, max_epochs=0, batching="paper",
                         sort_k=3)
        cfg.data.prepared = prepared
        cfg.model.word_dropout = word_dropout
        model_dir = train(cfg)
        assert (model_dir / "prepared").is_dir() == prepared
        weights.append(load_file(str(model_dir / "last.safetensors")))
    for k in weights[0]:
        assert torch.equal(weights[0][k], weights[1][k]), k


def test_a_shared_prepared_dir_serves_two_runs(tmp_path, caplog):
    shared = tmp_path / "cache"
    for name in ("a", "b"):
        cfg = toy_config(tmp_path, name, max_steps=2, max_epochs=0)
        cfg.data.prepared_dir = str(shared)
        with caplog.at_level(logging.INFO, logger="rnnsearch"):
            train(cfg)
    assert len(list(shared.iterdir())) == 1 and "reusing prepared" in caplog.text
    assert not (tmp_path / "a" / "prepared").exists()
