"""`rnnsearch serve --backend onnx`: a folder of ``rnnsearch export --format onnx`` served through the
torch-free runtime (runtime/, ``rnnsearch_runtime.Runtime``) instead of PyTorch.

:class:`ExportedTranslator` gives the serve layer what it reads of a Translator (``options``,
``translate_n_best``, ``check_prefixes``, ``check_constraints``, ``score``, ``source_ids``, ``cfg``,
the tokenisers, ``parameters``, ``device``, ``quantized``), and each answer is a
:class:`~rnnsearch.engine.decode.translator.Translation`, so attention rows and word links reach
the client formatted as the torch backend formats them. What the runtime cannot do — sampling,
prefixes, constraints, scoring, links other than the attention, GNMT's length penalty, the
coverage penalty — is a ConfigError that names the option and says "not available with
--backend onnx": the APIs answer it as their other field errors (422 in the native API).

The model's configuration comes from the manifest's ``config``: ``model`` and ``vocab``, and
``data`` (its training files name the languages of an unnamed ``--model``) and ``train`` (the
links' ``guided_alignment_shift``) where the export records them; absent, their defaults hold.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from rnnsearch.config import (
    Config,
    ConfigError,
    DataConfig,
    DecodeConfig,
    ModelConfig,
    TrainConfig,
    VocabConfig,
    decode_options,
)
from rnnsearch.engine.decode.translator import Translation, attention_kept
from rnnsearch.io import DataError

if TYPE_CHECKING:
    from rnnsearch_runtime import Result

log = logging.getLogger("rnnsearch")

OFF = "not available with --backend onnx"


def unavailable(d: DecodeConfig) -> Optional[tuple[str, str]]:
    """(option, why) for the first decoding option of `d` the runtime's search does not have, or None."""
    if d.sample:
        return "sample", "the runtime searches; it draws no samples"
    if d.links not in (None, "attention"):
        return "links", f"{d.links!r}: the exported graphs give the attention only (links 'attention')"
    if d.length_penalty != "power":
        return "length_penalty", f"{d.length_penalty!r}: the runtime ranks by log p / len**alpha (power)"
    if d.coverage:
        return "coverage", "the runtime's search has no coverage penalty"
    return None


class ExportedTranslator:
    """An exported model behind the serve layer: searched by ``rnnsearch_runtime.Runtime`` on the
    CPU, `threads` onnxruntime threads a graph (0: onnxruntime's default, one a physical core)."""

    backend = "onnx"

    def __init__(self, folder: str | Path, threads: int = 0):
        self.model_dir = Path(folder)
        self.manifest = read_manifest(self.model_dir)
        self.cfg = manifest_config(self.manifest, self.model_dir / "manifest.json")
        self.runtime = open_runtime(self.model_dir, threads)
        self.src_tok, self.tgt_tok = self.runtime.src_tok, self.runtime.tgt_tok
        self.device = "cpu"  # onnxruntime's CPU provider
        self.quantized = str(self.manifest.get("quantize", "none"))  # decided by rnnsearch export
        self.parameters = count_parameters(self.cfg, len(self.src_tok), len(self.tgt_tok))
        # the bytes of both graphs, their weights stored in them (int8 ones as stored)
        self.graph_bytes = sum((self.model_dir / self.manifest[key]).stat().st_size
                               for key in ("encoder", "step"))
        # the attention row that links y_i, as Translator.link_shift gives it for attention links
        self.shift = self.cfg.train.guided_alignment_shift
        if self.cfg.model.alignment_head != "none":
            log.warning("%s: its alignment head is not exported; links come from the attention",
                        self.model_dir)

    def options(self, base: Optional[DecodeConfig] = None, name: Callable[[str], str] = str,
                **overrides: Any) -> DecodeConfig:
        """Translator.options: `base` (default the manifest's decode section) with `overrides`,
        checked; an option the runtime does not have is a ConfigError naming it as `name` spells it."""
        options = decode_options(base or self.cfg.decode, overrides, name)
        off = unavailable(options)
        if off is not None:
            raise ConfigError(f"{name(off[0])}: {OFF} ({off[1]})")
        return options

    def source_ids(self, text: str) -> list[int]:
        """The source pieces the model reads for `text` (normalised as in training)."""
        return self.runtime.source_ids(text)

    def check_prefixes(self, sentences: list[str], prefixes: list[Optional[str]], d: DecodeConfig) -> None:
        """A ConfigError where a sentence has a prefix (null for every sentence asks for none)."""
        if any(p is not None for p in prefixes):
            raise ConfigError(f"prefix: {OFF} (the runtime's search starts every translation freely)")

    def check_constraints(self, sentences: list[str], constraints: list[Optional[list[str]]],
                          d: DecodeConfig) -> None:
        """A ConfigError where a sentence has phrases to contain (null or [] for every one: none)."""
        if any(constraints):
            raise ConfigError(f"constraints: {OFF} (the runtime has no constrained search)")

    def score(self, sources: Iterable[str], targets: Iterable[str], options: Optional[DecodeConfig] = None,
              **settings: Any) -> list:
        """Scoring given translations (POST /score) takes forced decoding, which the runtime does
        not have: a ConfigError, the API's 422."""
        raise ConfigError(f"score: {OFF} (the runtime searches; it does not score given translations: "
                          "serve the model directory with --backend torch)")

    def translate_n_best(self, sentences: Iterable[str], options: Optional[DecodeConfig] = None, *,
                         attention: bool = True, prefixes: Optional[list[Optional[str]]] = None,
                         constraints: Optional[list[Optional[list[str]]]] = None,
                         **overrides: Any) -> list[list[Translation]]:
        """Translator.translate_n_best through the runtime: each sentence's n_best translations,
        best first, as Translations (attention rows in reading order, links by the model's shift)."""
        d = self.options(options, **overrides)
        sentences = list(sentences)
        self.check_prefixes(sentences, prefixes or [], d)
        self.check_constraints(sentences, constraints or [], d)
        found = self.runtime.translate_n_best(sentences, beam=d.beam, n_best=d.n_best, alpha=d.alpha,
                                              max_len_ratio=d.max_len_ratio, max_source_len=d.max_source_len,
                                              batch_size=d.batch_size, attention=attention)
        return [[self._translation(text, r) for r in n_best] for text, n_best in zip(sentences, found)]

    def _translation(self, source: str, result: Result) -> Translation:
        """A runtime Result as Translator._result makes a Translation (and as it does, without the
        attention of a source past MAX_ATTENTION_CELLS: translator.attention_kept)."""
        rows = result.attention
        if rows is not None and not attention_kept(len(result.tokens), len(result.source_tokens)):
            rows = None
        t = Translation(result.text, result.tokens, result.score, result.source_tokens, rows)
        t.source, t.pieces_are_words, t.shift = source, self.cfg.vocab.kind == "word", self.shift
        return t


def read_manifest(folder: Path) -> dict:
    """The manifest.json of an exported folder; a DataError naming the folder and what to do where
    it is no export (a model directory of rnnsearch train, no manifest, another format)."""
    from rnnsearch_runtime.search import ModelError
    from rnnsearch_runtime.search import read_manifest as runtime_manifest

    path = folder / "manifest.json"
    if not folder.exists():
        raise DataError(f"--model {folder}: no such folder")
    if not folder.is_dir():
        raise DataError(f"--model {folder}: a file; --backend onnx serves a folder written by "
                        "`rnnsearch export --format onnx`")
    if not path.is_file():
        if (folder / "config.json").is_file():
            raise DataError(f"--model {folder}: a model directory of rnnsearch train, not an export; "
                            f"run `rnnsearch export --format onnx --model {folder} --out OUT` first and "
                            "serve OUT (or serve it with --backend torch)")
        raise DataError(f"--model {folder}: no manifest.json; --backend onnx serves a folder written by "
                        "`rnnsearch export --format onnx`: run rnnsearch export first")
    try:
        return runtime_manifest(folder)
    except ModelError as e:
        raise DataError(str(e)) from None


def manifest_config(manifest: dict, path: Path) -> Config:
    """The model's Config from the manifest: its config sections (model, vocab; data and train
    where recorded), reverse_source and lowercase, and the decode section over DecodeConfig's
    defaults; checked, a bad value a ConfigError naming the manifest and the key."""
    saved = manifest["config"]
    if not isinstance(saved, dict):
        raise DataError(f"{path}: config must be a mapping")
    sections: dict[str, Any] = {}
    for name, cls in (("data", DataConfig), ("vocab", VocabConfig), ("model", ModelConfig),
                      ("train", TrainConfig)):
        raw = saved.get(name, {})
        if not isinstance(raw, dict):
            raise DataError(f"{path}: config.{name} must be a mapping")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise DataError(f"{path}: unknown key config.{name}.{unknown[0]} (an export of another "
                            "rnnsearch version?)")
        sections[name] = cls(**raw)
    sections["data"] = dataclasses.replace(sections["data"], reverse_source=bool(manifest["reverse_source"]),
                                           lowercase=bool(manifest["lowercase"]))
    if not isinstance(manifest["decode"], dict):
        raise DataError(f"{path}: decode must be a mapping")
    def where(key: str) -> str:
        return f"{path}: decode.{key}"

    decode = decode_options(DecodeConfig(), manifest["decode"], where)
    off = unavailable(decode)
    if off is not None:
        raise ConfigError(f"{where(off[0])}: {OFF} ({off[1]}); serve the model directory with "
                          "--backend torch")
    return Config(decode=decode, **sections)


def open_runtime(folder: Path, threads: int) -> Any:
    """rnnsearch_runtime's Runtime over the folder; a DataError naming the folder where a file is
    missing or onnxruntime cannot read a graph."""
    from rnnsearch_runtime.search import ModelError, Runtime

    try:
        return Runtime(folder, threads)
    except ModelError as e:
        raise DataError(f"--model {folder}: {e}") from None
    except (OSError, KeyError, TypeError) as e:
        raise DataError(f"--model {folder}: cannot read the export ({type(e).__name__}: {e})") from None
    except Exception as e:  # noqa: BLE001 — onnxruntime's errors (InvalidProtobuf, Fail) derive from Exception
        raise DataError(f"--model {folder}: onnxruntime cannot load its graphs ({type(e).__name__}: "
                        f"{str(e).splitlines()[0] if str(e) else ''})") from None


def count_parameters(cfg: Config, src_vocab: int, tgt_vocab: int) -> int:
    """The model's parameter count as the torch backend reports it (the alignment head included):
    the model built on the meta device, no memory taken."""
    import torch

    from rnnsearch.nn.model import build_model

    with torch.device("meta"):
        return build_model(cfg.model, src_vocab, tgt_vocab).num_parameters()


def onnx_threads() -> int:
    """onnxruntime threads a graph: OMP_NUM_THREADS where set, as for the torch backend, else 0
    (onnxruntime's default: one a physical core)."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() else 0


def refuse_torch_flags(device: str, quantize: str, cuda_graphs: bool, shortlist: Optional[str],
                       plain: bool) -> None:
    """A ConfigError for the first PyTorch option given with --backend onnx, saying why."""
    if quantize != "none":
        raise ConfigError(f"--quantize {quantize}: {OFF}; an export is quantised when written "
                          "(rnnsearch export --quantize int8) and /info says so")
    if device not in ("auto", "cpu"):
        raise ConfigError(f"--device {device}: {OFF}; onnxruntime decodes on the CPU (leave --device out)")
    for flag, given in (("--cuda-graphs", cuda_graphs), ("--shortlist", shortlist is not None),
                        ("--plain", plain)):
        if given:
            raise ConfigError(f"{flag}: {OFF} (a PyTorch decoding path)")


def load_exported(spec_path: str, threads: Optional[int] = None) -> ExportedTranslator:
    """The exported folder of one ``--model [SRC-TGT=]DIR`` (its DIR); an ensemble (DIR,DIR) is a
    ConfigError, and so is a missing onnxruntime."""
    if "," in spec_path:
        raise ConfigError(f"--model {spec_path}: an ensemble is {OFF}; serve each exported folder as "
                          "a --model of its own, or the model directories with --backend torch")
    try:
        import onnxruntime  # noqa: F401
        import rnnsearch_runtime  # noqa: F401
    except ImportError as e:
        raise ConfigError(f"--backend onnx: {e.name} is missing: pip install 'rnnsearch[onnx]' "
                          "(and ./runtime)") from None
    return ExportedTranslator(spec_path, onnx_threads() if threads is None else threads)
