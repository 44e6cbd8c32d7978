"""Loading a model directory (or several: an ensemble) as a Translator.

    >>> import rnnsearch
    >>> model = rnnsearch.load("runs/multi30k")                        # one model
    >>> ensemble = rnnsearch.load(["runs/seed1", "runs/seed2"])        # several, as one
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

from rnnsearch.config import ConfigError
from rnnsearch.engine.accel.graphs import GraphedStep
from rnnsearch.engine.checkpoint import load_model_dir
from rnnsearch.engine.decode.ensemble import ensemble
from rnnsearch.engine.decode.translator import Translator
from rnnsearch.engine.distributed import resolve_device
from rnnsearch.io import MissingFileError


def load(model_dir: str | Path | list[str | Path], device: str = "auto", quantize: str = "none",
         cuda_graphs: bool = False, shortlist: Optional[str | Path] = None,
         plain: bool = False) -> Translator:
    """Load a model directory written by ``rnnsearch train`` (several, as a list or joined by
    commas: an ensemble, engine/decode/ensemble.py); ``quantize="int8"`` decodes with
    int8 matrix products on the CPU (engine/accel/quantize.py), the files on disk untouched;
    ``cuda_graphs`` replays each decoding step from a CUDA graph (engine/accel/graphs.py; GPUs only;
    not with a shortlist, whose output layer changes size); ``shortlist`` (a file or "auto")
    restricts the output layer to a lexical shortlist (engine/accel/shortlist.py); ``plain``:
    nn/'s plain code only."""
    from rnnsearch.engine.accel.quantize import KINDS

    dirs = model_dirs(model_dir)
    if len(dirs) > 1:
        return ensemble([load(d, device, quantize, cuda_graphs, shortlist, plain) for d in dirs])
    if quantize not in KINDS:
        raise ConfigError(f"quantize must be one of {', '.join(KINDS)}, got {quantize!r}")
    dev = resolve_device(device)
    if quantize != "none" and dev.type != "cpu":
        raise ConfigError(f"--quantize {quantize} decodes on the CPU; the model was to load on {dev} "
                         "(give --device cpu)")
    if cuda_graphs and dev.type != "cuda":
        raise ConfigError(f"--cuda-graphs needs a CUDA device; the model was to load on {dev}")
    model_dir = dirs[0]
    cfg, model, src_tok, tgt_tok = load_model_dir(model_dir, dev)
    if plain:
        cfg = dataclasses.replace(cfg, plain=True)
    listed = None if shortlist is None else _shortlist(shortlist, model_dir, cfg, len(src_tok))
    return Translator(cfg, model, src_tok, tgt_tok, dev, model_dir=model_dir, quantize=quantize,
                      graphs=GraphedStep(model) if cuda_graphs else None, shortlist=listed)


def model_dirs(spec: str | Path | list[str | Path]) -> list[Path]:
    """The model directories of a model argument: one, a list, or several joined by commas."""
    parts = [spec] if isinstance(spec, (str, Path)) else list(spec)
    dirs = [Path(d) for part in parts for d in str(part).split(",") if d]
    if not dirs:
        raise ConfigError("no model directory given")
    return dirs


def _shortlist(source: str | Path, model_dir: Path, cfg, src_vocab: int):
    """The lexical shortlist (engine/accel/shortlist.py) of a loaded model: a file, or "auto" for
    <model_dir>/shortlist.npz, built (and saved) from the training data when absent."""
    from rnnsearch.engine.accel.shortlist import FILE_NAME, build_shortlist, load_shortlist

    path = model_dir / FILE_NAME if str(source) == "auto" else Path(source)
    if str(source) == "auto" and not path.exists():
        build_shortlist(model_dir, cfg=cfg).save(path)
    elif not path.exists():
        raise MissingFileError(path, f"{path}: no such shortlist (rnnsearch shortlist build --model "
                                     f"{model_dir} --out {path}; or --shortlist auto)")
    return load_shortlist(path, model_dir, src_vocab, cfg.vocab)
