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
    from rnnsearch.engine.train import train

    state = model_copy / "train_state.safetensors"
    state.write_bytes(state.read_bytes()[:5000])  # truncated, as by a full disk
    cfg = read_config(model_copy)
    cfg.model_dir = str(model_copy)
    with pytest.raises(CheckpointError, match="training state is damaged"):
        train(cfg, resume=True)
