"""The model directory: everything needed to rebuild, use and resume a model.

    config.json              the full configuration (rebuilds the exact model)
    model.safetensors        best weights by validation (what `rnnsearch.load` uses)
    last.safetensors         most recent weights
    train_state.safetensors  what resume reads, in one atomic file: weights, optimizer tensors,
                             RNG state, and (metadata) step, epoch, position, best score, lr
    train_state.json         a readable copy of that state
    src.spm.model / tgt.spm.model  (or joint.*, or *.vocab.txt for word vocabularies)
    log.jsonl                training and validation metrics, one JSON object a line
    checkpoints/             with train.keep_last: the last N snapshots (`rnnsearch average`)

Every file is written to a temporary name and renamed, so a crash at any instant
leaves the previous good file in place. No pickle anywhere.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from rnnsearch.config import Config, ConfigError, config_from_dict, upgrade_saved
from rnnsearch.engine.data.vocab import load_tokenizers, tokenizer_files
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
        return config_from_dict(upgrade_saved(raw), source=str(path))  # an older rnnsearch's keys, upgraded
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path}: not valid JSON ({e})") from None
    except RecursionError:
        raise CheckpointError(f"{path}: not valid JSON (nested too deeply)") from None
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


# -- checkpoint averaging ----------------------------------------------------------
def snapshots(model_dir: Path) -> list[Path]:
    """The weight snapshots ``train.keep_last`` kept in ``model_dir/checkpoints``, oldest first."""
    return sorted((Path(model_dir) / "checkpoints").glob("step-*.safetensors"))


def average_weights(paths: list[Path]) -> dict[str, torch.Tensor]:
    """The element-wise mean of several weight files of one model, accumulated in fp64 and
    returned in each tensor's own dtype: checkpoint averaging, a smoother model than any one
    checkpoint of a noisy run (on Multi30k it measured level with the best one: docs/results.md)."""
    if not paths:
        raise CheckpointError("average: no weight files given")
    first = paths[0]
    total: dict[str, torch.Tensor] = {}
    kept: dict[str, torch.Tensor] = {}  # the first file's tensors: dtypes, and integer buffers as they are
    for n, path in enumerate(paths):
        try:
            tensors = load_file(str(path))
        except (SafetensorError, OSError, ValueError) as e:
            raise CheckpointError(f"{path}: not a readable safetensors file ({e})") from None
        if n == 0:
            kept = tensors
            total = {k: v.to(torch.float64) for k, v in tensors.items() if v.is_floating_point()}
            continue
        if set(tensors) != set(kept):
            diff = sorted(set(tensors) ^ set(kept))
            raise CheckpointError(f"{path}: not the same model as {first} (tensors {diff[:3]} differ)")
        for k, v in tensors.items():
            if v.shape != kept[k].shape:
                raise CheckpointError(f"{path}: {k} has shape {tuple(v.shape)}, {first} has "
                                      f"{tuple(kept[k].shape)}: not the same model")
            if k in total:
                total[k] += v.to(torch.float64)
    return {k: (total[k] / len(paths)).to(v.dtype) if k in total else v for k, v in kept.items()}


def write_averaged_model(model_dir: Path, paths: list[Path], out_dir: Path) -> Path:
    """A new model directory ``out_dir``: ``model_dir``'s config and tokenizers, and as its
    weights the average of ``paths``. Every command that takes a model directory reads it; it
    is built under a temporary name and renamed, so no half-written directory is ever left."""
    import shutil
    import tempfile

    model_dir, out_dir = Path(model_dir), Path(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise CheckpointError(f"{out_dir}: exists and is not empty; give a new directory")
    if not paths:
        raise CheckpointError("average: no weight files given")
    # the run's config and tokenizers, with the first file as weights: every check load_model_dir makes
    cfg = load_model_dir(model_dir, weights=str(Path(paths[0]).resolve()))[0]
    names = dict.fromkeys(tokenizer_files(cfg.vocab.kind, cfg.vocab.joint))
    averaged = average_weights(paths)  # the others checked against the first
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        for name in ("config.json", *names):
            shutil.copy2(model_dir / name, tmp / name)
        meta = {"averaged": json.dumps([str(p) for p in paths])}
        save_file(averaged, str(tmp / "model.safetensors"), metadata=meta)
        if out_dir.exists():
            out_dir.rmdir()  # empty, checked above
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir / "model.safetensors"

