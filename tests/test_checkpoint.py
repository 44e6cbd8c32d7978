"""Model directories: damaged or foreign files give one clear error, never a deep traceback."""

import shutil

import pytest

import rnnsearch
from rnnsearch.engine.checkpoint import CheckpointError


@pytest.fixture
def model_copy(reverse_model, tmp_path):
    dst = tmp_path / "model"
    shutil.copytree(reverse_model, dst)
    return dst


def test_truncated_weights(model_copy):
    path = model_copy / "model.safetensors"
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="model.safetensors: not a readable safetensors file"):
        rnnsearch.load(model_copy, device="cpu")


def test_foreign_file_as_weights(model_copy):
    (model_copy / "model.safetensors").write_bytes(b"PK\x03\x04 this is a zip, not safetensors" * 10)
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        rnnsearch.load(model_copy, device="cpu")


def test_weights_of_another_model(model_copy):
    import json

    cfg = json.loads((model_copy / "config.json").read_text())
    cfg["model"]["hidden"] = 40  # config no longer matches the weights
    (model_copy / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="the model expects"):
        rnnsearch.load(model_copy, device="cpu")


def test_damaged_config(model_copy):
    (model_copy / "config.json").write_text("{ not json")
    with pytest.raises(CheckpointError, match="config.json: not valid JSON"):
        rnnsearch.load(model_copy, device="cpu")


def test_missing_tokenizer(model_copy):
    for p in model_copy.glob("*vocab.txt"):
        p.unlink()
    with pytest.raises(CheckpointError, match="no such file"):
        rnnsearch.load(model_copy, device="cpu")


def test_damaged_train_state_refuses_to_resume(model_copy):
    from rnnsearch.engine.checkpoint import read_config
    from rnnsearch.engine.train.trainer import train

    state = model_copy / "train_state.safetensors"
    state.write_bytes(state.read_bytes()[:5000])  # truncated, as by a full disk
    cfg = read_config(model_copy)
    cfg.model_dir = str(model_copy)
    with pytest.raises(CheckpointError, match="training state is damaged"):
        train(cfg, resume=True)


def test_a_checkpoint_cut_short_by_a_full_disk_leaves_the_last_one_resumable(model_copy, monkeypatch):
    """The disk fills while the next checkpoint is written: the error reaches the caller, the
    previous checkpoint is untouched and no half-written file is left; resuming then works."""
    import errno
    import json

    from rnnsearch.engine import checkpoint
    from rnnsearch.engine.checkpoint import read_config
    from rnnsearch.engine.train.trainer import train

    step = json.loads((model_copy / "train_state.json").read_text())["step"]
    before = {p.name: p.read_bytes() for p in model_copy.iterdir() if p.is_file()}

    def full_disk(tensors, path, metadata=None):
        with open(path, "wb") as f:
            f.write(b"\0" * 4096)  # part of the file, then no more room
        raise OSError(errno.ENOSPC, "No space left on device", path)

    cfg = read_config(model_copy)
    cfg.model_dir, cfg.train.max_steps, cfg.train.progress = str(model_copy), step + 3, False
    monkeypatch.setattr(checkpoint, "save_file", full_disk)
    with pytest.raises(OSError, match="No space left"):
        train(cfg, resume=True)
    for name in ("train_state.safetensors", "train_state.json", "model.safetensors", "last.safetensors"):
        assert (model_copy / name).read_bytes() == before[name], name
    assert not list(model_copy.glob(".*.tmp"))
    monkeypatch.undo()
    train(cfg, resume=True)
    assert json.loads((model_copy / "train_state.json").read_text())["step"] == step + 3


def _snapshots(model_dir, offsets):
    """Copies of the model's weights shifted by each offset, as train.keep_last keeps them."""
    from safetensors.torch import load_file, save_file

    base = load_file(str(model_dir / "model.safetensors"))
    (model_dir / "checkpoints").mkdir(exist_ok=True)
    for n, d in enumerate(offsets):
        path = model_dir / "checkpoints" / f"step-{n + 1:08d}.safetensors"
        save_file({k: v + d for k, v in base.items()}, str(path))
    return base


def test_average_the_last_checkpoints(model_copy, tmp_path):
    import torch
    from safetensors.torch import load_file

    from rnnsearch.cli import main

    base = _snapshots(model_copy, [5.0, 0.0, 1.0, 2.0])  # the oldest is left out of --last 3
    assert main(["average", str(model_copy), "--out", str(tmp_path / "avg"), "--last", "3"]) == 0
    got = load_file(str(tmp_path / "avg" / "model.safetensors"))
    assert set(got) == set(base)
    for k, v in base.items():
        assert got[k].dtype == v.dtype and torch.allclose(got[k], v + 1.0, atol=1e-6), k
    assert sorted(p.name for p in (tmp_path / "avg").iterdir()) == ["config.json", "model.safetensors",
                                                                     "src.vocab.txt", "tgt.vocab.txt"]
    # a model directory like any other: the same translations as the run's own weights shifted by 1
    (model_copy / "checkpoints" / "step-00000001.safetensors").unlink()
    assert main(["average", str(model_copy), "--out", str(tmp_path / "one"),
                 "--weights", str(model_copy / "checkpoints" / "step-00000004.safetensors"),
                 str(model_copy / "checkpoints" / "step-00000002.safetensors")]) == 0
    a = rnnsearch.load(tmp_path / "avg", device="cpu").translate(["w1 w2 w3"])[0]
    b = rnnsearch.load(tmp_path / "one", device="cpu").translate(["w1 w2 w3"])[0]
    # the two means differ by rounding only (a float32 ulp of the shifted weights, b+1 and b+2 being
    # rounded themselves); 16 steps of decoding turn that into up to 1e-4 of the score (7e-5 on an
    # AVX2 CPU), so the tolerance is relative, not the 1e-5 an AVX-512 CPU happened to meet
    assert a.tokens == b.tokens and a.score == pytest.approx(b.score, rel=1e-3)


def test_average_refuses_what_it_cannot_do(model_copy, tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    from rnnsearch.cli import main

    _snapshots(model_copy, [0.0, 1.0])
    assert main(["average", str(model_copy), "--out", str(tmp_path / "a"), "--last", "3"]) == 2
    assert "2 snapshot(s), --last asks for 3" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("data")
    assert main(["average", str(model_copy), "--out", str(tmp_path / "full"), "--last", "2"]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    assert (tmp_path / "full" / "keep.txt").read_text() == "data"  # nothing overwritten
    other = {k: v[:1] for k, v in load_file(str(model_copy / "model.safetensors")).items()}
    save_file(other, str(tmp_path / "other.safetensors"))
    assert main(["average", str(model_copy), "--out", str(tmp_path / "b"), "--weights",
                 str(model_copy / "model.safetensors"), str(tmp_path / "other.safetensors")]) == 2
    err = capsys.readouterr().err
    assert "other.safetensors" in err and "not the same model" in err
    broken = model_copy / "checkpoints" / "step-00000002.safetensors"
    broken.write_bytes(broken.read_bytes()[:500])
    assert main(["average", str(model_copy), "--out", str(tmp_path / "c"), "--last", "2"]) == 2
    assert "step-00000002.safetensors: not a readable safetensors file" in capsys.readouterr().err
    # nothing half-written: no output directory, no temporary one
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full", "model", "other.safetensors"]
