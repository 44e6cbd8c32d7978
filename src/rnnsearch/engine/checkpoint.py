"""The model directory: everything needed to rebuild, use and resume a model.

    config.json              the full configuration (rebuilds the exact model)
    model.safetensors        best weights by validation (what `rnnsearch.load` uses)
    last.safetensors         most recent weights
    train_state.safetensors  what resume reads, in one atomic file: weights, optimizer tensors,
                             RNG state, and (metadata) step, epoch, position, best score, lr
    train_state.json         a readable copy of that state
    src.spm.model / tgt.spm.model  (or joint.*, or *.vocab.txt for word vocabularies)
    log.jsonl                training and validation metrics, one JSON object a line

Every file is written to a temporary name and renamed, so a crash at any instant
leaves the previous good file in place. No pickle anywhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from rnnsearch.config import Config, ConfigError, config_from_dict
from rnnsearch.engine.vocab import load_tokenizers
from rnnsearch.io import DataError, atomic_write, atomic_write_text
from rnnsearch.nn.model import build_model


class CheckpointError(ValueError):
    """A model directory or checkpoint that cannot be used; the message says why."""


def save_weights(path: Path, model: torch.nn.Module, metadata: dict[str, str] | None = None) -> None:
    tensors = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata=metadata or {}))


class VocabularyMismatch(CheckpointError):
    """Weights whose embedding or output layer does not fit the vocabulary files beside them."""


def load_weights(path: Path, model: torch.nn.Module) -> None:
    if not path.exists():
        raise CheckpointError(f"{path}: no such weights file")
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{path}: not a readable safetensors file ({e})") from None
    own = model.state_dict()
    missing = sorted(set(own) - set(tensors))
    extra = sorted(set(tensors) - set(own))
    if missing or extra:
        raise CheckpointError(f"{path}: weights do not match the model in config.json "
                              f"(missing {missing[:3]}, unexpected {extra[:3]})")
    for k, v in tensors.items():
        if v.shape != own[k].shape:
            # embeddings and the output layer are sized by the vocabularies
            kind = VocabularyMismatch if "_emb." in k or "W_o." in k else CheckpointError
            raise kind(f"{path}: {k} has shape {tuple(v.shape)}, the model expects "
                       f"{tuple(own[k].shape)} (vocabulary or size mismatch)")
    model.load_state_dict(tensors)


def read_config(model_dir: Path) -> Config:
    path = model_dir / "config.json"
    if not path.exists():
        raise CheckpointError(f"{model_dir}: not an rnnsearch model directory (no config.json)")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return config_from_dict(raw, source=str(path))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path}: not valid JSON ({e})") from None
    except ConfigError as e:
        raise CheckpointError(str(e)) from None


def load_model_dir(model_dir: str | Path, device: str | torch.device = "cpu",
                   weights: str = "model.safetensors"):
    """Rebuild (config, model, src_tokenizer, tgt_tokenizer) from a model directory."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise CheckpointError(f"{model_dir}: no such model directory")
    cfg = read_config(model_dir)
    try:
        src_tok, tgt_tok = load_tokenizers(model_dir, cfg.vocab)
    except DataError as e:
        raise CheckpointError(str(e)) from None
    model = build_model(cfg.model, len(src_tok), len(tgt_tok))
    try:
        load_weights(model_dir / weights, model)
    except VocabularyMismatch as e:
        raise CheckpointError(f"{e}; the tokenizer files in {model_dir} have {len(src_tok):,} source and "
                              f"{len(tgt_tok):,} target entries: they are not the vocabulary this model was "
                              f"trained with (was a tokenizer file replaced?)") from None
    model.to(device).eval()
    return cfg, model, src_tok, tgt_tok


# -- training state ------------------------------------------------------------
# Everything a resume needs — weights, optimizer tensors, RNG state and the JSON state —
# goes into ONE safetensors file written atomically: a kill at any instant leaves either
# the previous complete state or the new one, never weights of one step with the
# optimizer of another. train_state.json is a readable copy, not used to resume.
def save_train_state(model_dir: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                     state: dict[str, Any]) -> None:
    opt = optimizer.state_dict()
    tensors = {f"model.{k}": v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    slots: dict[str, dict[str, Any]] = {}
    for pid, slot in opt["state"].items():
        slots[str(pid)] = {}
        for key, value in slot.items():
            if torch.is_tensor(value):
                tensors[f"opt.{pid}.{key}"] = value.detach().contiguous().cpu()
                slots[str(pid)][key] = "tensor"
            else:
                slots[str(pid)][key] = value
    tensors["torch_rng"] = torch.get_rng_state()
    payload = dict(state, optimizer={"param_groups": opt["param_groups"], "slots": slots})
    text = json.dumps(payload)
    atomic_write(model_dir / "train_state.safetensors",
                 lambda tmp: save_file(tensors, tmp, metadata={"state": text}))
    atomic_write_text(model_dir / "train_state.json", json.dumps(payload, indent=1) + "\n")


def load_train_state(model_dir: Path, model: torch.nn.Module,
                     optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Restore weights, optimizer and RNG from train_state.safetensors; return the JSON state."""
    from safetensors import safe_open

    path = model_dir / "train_state.safetensors"
    if not path.exists():
        raise CheckpointError(f"{model_dir}: nothing to resume (no train_state.safetensors)")
    try:
        with safe_open(str(path), framework="pt") as f:
            state = json.loads((f.metadata() or {})["state"])
        tensors = load_file(str(path))
    except (json.JSONDecodeError, KeyError, SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{path}: training state is damaged ({e})") from None
    weights = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    own = model.state_dict()
    if set(weights) != set(own) or any(weights[k].shape != own[k].shape for k in own):
        raise CheckpointError(f"{path}: the saved weights do not match the model in config.json")
    model.load_state_dict(weights)
    opt = state.pop("optimizer")
    restored = {"param_groups": opt["param_groups"], "state": {}}
    for pid, slot in opt["slots"].items():
        restored["state"][int(pid)] = {
            k: (tensors[f"opt.{pid}.{k}"] if v == "tensor" else v) for k, v in slot.items()}
    try:
        optimizer.load_state_dict(restored)
    except (ValueError, KeyError) as e:
        raise CheckpointError(
            f"{model_dir}: optimizer state does not fit this model/optimizer ({e})") from None
    torch.set_rng_state(tensors["torch_rng"])
    return state
