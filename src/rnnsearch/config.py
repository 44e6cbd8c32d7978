"""One configuration tree for data, vocabulary, model, training and decoding.

A config is a YAML (or JSON) file of nested sections, validated on load: an unknown
key or a value of the wrong type is a one-line ``ConfigError`` naming the file and
the key.  ``--set section.key=value`` overrides are parsed as YAML scalars.  The
whole tree is saved as ``config.json`` inside every model directory, so loading a
directory rebuilds exactly the model that was trained.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import json
import re
import reprlib
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional

import yaml


class ConfigError(ValueError):
    """A configuration problem a user can fix; the message names file and key."""


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads 1e-3 as a float (YAML 1.2; PyYAML's 1.1 wants 1.0e-3)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^[-+]?(?:[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?|\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                  |[0-9][0-9_]*[eE][-+]?[0-9]+|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))


MAX_YAML_VALUES = 100_000  # a config holds a few hundred; aliases of aliases can make a few lines billions


def _yaml(text: str):
    """yaml.load's two stages, parse to nodes then build values, with the nodes measured between."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node, {}, set()) > MAX_YAML_VALUES:
            raise yaml.YAMLError(f"its aliases expand to more than {MAX_YAML_VALUES:,} values")
        return loader.construct_document(node)
    except RecursionError:  # nesting deeper than Python's stack (a 100 kB file of brackets will do)
        raise yaml.YAMLError("nested too deeply") from None
    finally:
        loader.dispose()


def _expanded_size(node: yaml.Node, sizes: dict[int, int], open_: set[int]) -> int:
    """How many values `node` holds once every alias in it is expanded. A node that several
    aliases share is counted once and its size reused, so a bomb is measured without building it."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_:
        raise yaml.YAMLError("an alias refers to a node that contains it")
    open_.add(key)
    if isinstance(node, yaml.SequenceNode):
        children = node.value
    elif isinstance(node, yaml.MappingNode):
        children = [part for pair in node.value for part in pair]
    else:
        children = []
    sizes[key] = 1 + sum(_expanded_size(child, sizes, open_) for child in children)
    open_.discard(key)
    return sizes[key]


def _show(value: Any) -> str:
    """repr of a value for an error message, cut short: a config value can be a megabyte."""
    short = reprlib.Repr()
    short.maxstring, short.maxother, short.maxlist, short.maxdict, short.maxlevel = 80, 80, 6, 6, 3
    return short.repr(value)


# The values of the keys that several places offer as choices (the CLI's flags, nn/, messages):
# written once here, as the Literal the config check reads, and as a tuple of those values.
DecodePrecision = Literal["auto", "fp32", "bf16"]  # decode.precision, translate/evaluate --precision
TrainPrecision = Literal[DecodePrecision, "fp16"]  # train.precision, train --precision (fp16: GPUs)
DECODE_PRECISIONS: tuple[str, ...] = typing.get_args(DecodePrecision)
TRAIN_PRECISIONS: tuple[str, ...] = typing.get_args(TrainPrecision)
AlignmentHead = Literal["none", "past", "future", "past+refine", "future+refine"]  # model.alignment_head
ALIGNMENT_HEADS: tuple[str, ...] = typing.get_args(AlignmentHead)
QUANTIZE = ("none", "int8")  # --quantize: none, or int8 decoding (engine/accel/quantize.py)
Links = Literal["attention", "head", "saliency", "mean"]  # decode.links: where word links are read from
LINKS: tuple[str, ...] = typing.get_args(Links)


@dataclass
class DataConfig:
    # Line-aligned parallel files (plain or .gz), or one TSV with source<TAB>target.
    train_src: Optional[str] = None  # source side of the training pairs, one sentence a line
    train_tgt: Optional[str] = None  # target side, line-aligned with train_src
    train_tsv: Optional[str] = None  # or one file: source<TAB>target per line
    valid_src: Optional[str] = None  # validation pairs (loss, BLEU, early stopping)
    valid_tgt: Optional[str] = None  # target side of the validation pairs
    valid_tsv: Optional[str] = None  # or validation pairs as one TSV
    max_len: int = 50  # pairs with more tokens on either side are dropped (RNNsearch-50)
    reverse_source: bool = False  # Sutskever et al. (2014): feed the source backwards
    lowercase: bool = False  # lowercase both sides before the vocabulary is built
    valid_bleu_sentences: int = 1000  # cap on validation sentences decoded for BLEU
    bleu_tokenize: str = "13a"  # sacrebleu tokenizer for validation BLEU and `evaluate` (zh: Chinese)
    # Training pairs are encoded once into memory-mapped arrays (engine/data/prepared.py) and read from
    # disk, so memory stays flat in corpus size; false: encoded into memory on every start.
    prepared: bool = True
    prepared_dir: Optional[str] = None  # where prepared corpora are kept (default: <model_dir>/prepared)
    prepare_workers: int = 0  # processes encoding a corpus (0: every core this process may run on)


@dataclass
class VocabConfig:
    kind: Literal["bpe", "unigram", "word"] = "bpe"  # sentencepiece BPE / unigram, or whitespace words
    size: int = 8000  # per side, the 4 special tokens included (word: k-4 most frequent words)
    joint: bool = False  # one sentencepiece model / word list for both sides
    character_coverage: float = 1.0  # ~0.9995 for Chinese/Japanese
    byte_fallback: bool = False  # sentencepiece: unknown characters become bytes
    sample_pairs: int = 2_000_000  # built from a seeded sample of this many pairs of a larger corpus (0: all)


@dataclass
class ModelConfig:
    arch: Literal["rnnsearch", "rnnencdec"] = "rnnsearch"  # attention, or the fixed-vector baseline
    emb: int = 620  # m
    hidden: int = 1000  # n (per encoder direction, and the decoder state)
    align: int = 1000  # n' (additive alignment model)
    maxout: int = 500  # l
    score: Literal["additive", "dot", "general", "scaled_dot"] = "additive"  # alignment model a(s, h)
    gru: Literal["paper", "cudnn"] = "paper"  # reset gate before U (paper) or after (cuDNN)
    readout: Literal["prev", "new"] = "prev"  # deep output reads s_{i-1} (Appendix A) or s_i
    # a second alignment model beside the attention, trained by train.guided_alignment only, that
    # gives the links (nn/alignment_head.py): none, or its query is the first decoder state that has
    # read y_i (past) or that state and a backward GRU over the target words after y_i (future);
    # +refine: its scores refined by a convolution over the pair's whole score matrix
    alignment_head: AlignmentHead = "none"
    init_state: Literal["backward_first", "mean"] = "backward_first"  # s_0 from ←h_1 or mean h_j
    dropout_emb: float = 0.0  # on source and target embeddings
    dropout_hidden: float = 0.0  # on annotations h_j (and the RNNencdec context)
    dropout_readout: float = 0.0  # on the maxout output t_i
    dropout_state: float = 0.0  # on the encoder's carried recurrent state (one mask per sentence)
    dropout_dec_state: float = 0.0  # on the decoder's carried state s_{i-1} (one mask per sentence)
    word_dropout: float = 0.0  # source tokens replaced by UNK during training
    word_dropout_target: float = 0.0  # previous target words fed to the decoder replaced by UNK (training)
    # paper: Appendix B (slow to start: v_a = 0 gives W_a, U_a no gradient); uniform: U(±init_scale)
    init: Literal["uniform", "paper", "glorot", "glorot_orthogonal"] = "uniform"
    init_scale: float = 0.1  # bound of init: uniform


@dataclass
class TrainConfig:
    optimizer: Literal["adadelta", "adam"] = "adadelta"  # the paper used Adadelta (rho 0.95, eps 1e-6)
    lr: float = 1.0  # learning rate (Adadelta: 1.0 as in the paper)
    rho: float = 0.95  # Adadelta
    eps: Optional[float] = None  # epsilon; unset: 1e-6 for Adadelta (the paper), 1e-8 for Adam (torch's)
    weight_decay: float = 0.0  # L2 penalty in the optimizer
    clip_norm: float = 1.0  # clip the gradient's global norm to this (paper: 1); 0: off
    label_smoothing: float = 0.0  # share of probability spread over the vocabulary in the loss
    # agreement-based joint training (engine/train/agreement.py): with λ > 0 a target→source model trains
    # beside this one, in model_dir/reverse, both attentions pulled towards one alignment; 0: off
    agreement: float = 0.0
    agreement_loss: Literal["sos", "mul"] = "mul"  # Δ, the disagreement of the two attentions
    # guided alignment (engine/train/guided.py): the attention pulled towards given word links; "auto":
    # eflomal's (rnnsearch data align, made on first use), or a Pharaoh links file; None: off
    guided_alignment: Optional[str] = None
    guided_alignment_weight: float = 1.0  # the loss's weight against the NLL (both per target token)
    guided_alignment_loss: Literal["ce", "mse"] = "ce"  # cross-entropy or squared error to the links
    guided_alignment_shift: int = 0  # 0: α_i guided to the links of y_i; 1: α_{i+1} (see guided.py)
    guided_alignment_half_life: int = 0  # steps in which the weight halves; 0: constant
    # steps trained with every model.dropout_* and word dropout off before they apply ("late
    # dropout"): a small corpus is learned fastest unregularised, then dropout keeps it from overfitting
    dropout_start: int = 0
    batch_size: int = 80  # sentences, or target tokens when batch_by == "tokens"
    batch_by: Literal["sentences", "tokens"] = "sentences"  # what batch_size counts
    batching: Literal["paper", "bucket", "random"] = "paper"  # how pairs are grouped into batches
    sort_k: int = 20  # paper: take sort_k * batch pairs, sort by length, cut into sort_k batches
    max_epochs: int = 10  # passes over the training data
    max_steps: int = 0  # 0: no limit
    max_minutes: float = 0.0  # 0: no limit (wall-clock budget, checked between steps)
    valid_every: int = 1000  # steps; 0: validate at the end of each epoch only
    valid_beam: int = 1  # beam size of the validation BLEU decode
    valid_metric: Literal["bleu", "chrf", "loss"] = "bleu"  # picks the best checkpoint, drives patience
    patience: int = 0  # validations without improvement before stopping; 0: never
    stop_valid_loss: float = 0.0  # stop once a validation loss is at most this; 0: never
    lr_decay: float = 1.0  # multiply lr by this on a plateau (1.0: off)
    lr_patience: int = 2  # validations without improvement before lr decays
    min_lr: float = 0.0  # lr never decays below this
    log_every: int = 100  # steps between training log lines
    keep_last: int = 0  # weight snapshots kept in checkpoints/ besides best and last (0: none)
    save_every_minutes: float = 0.0  # also checkpoint (no validation) every N minutes of training; 0: off
    seed: int = 1234  # weights, batches and dropout are seeded
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    # autocast (bf16 also on CPUs); softmaxes stay fp32; fp16 adds a scaler; auto: bf16 where it
    # measures faster on this machine, else fp32 (engine/precision.py)
    precision: TrainPrecision = "auto"
    # torch.compile the decoder's time step (attention + GRU cell); see docs/benchmarks.md
    compile: bool = False
    threads: int = 0  # torch CPU threads; 0: OMP_NUM_THREADS if set, else one a free core
    progress: bool = True  # tqdm progress bar
    tensorboard: bool = True  # when the tensorboard package is installed

    def __post_init__(self) -> None:
        if self.eps is None:  # resolved on construction, so config.json says what the optimizer used
            self.eps = 1e-6 if self.optimizer == "adadelta" else 1e-8


MAX_BEAM = 256


@dataclass
class DecodeConfig:
    """Every decoding option, with its default; :meth:`problem` is the one check of their
    ranges, and :func:`decode_options` the one way a caller's values (a CLI flag, an HTTP field,
    a Python keyword) are set over a model's (nn.search.SearchOptions reads them from here)."""

    beam: int = 5  # beam width (1: greedy)
    alpha: float = 1.0  # length normalisation: score / len**alpha (0: raw log-prob)
    length_penalty: Literal["power", "gnmt"] = "power"  # len**alpha, or GNMT's ((5 + len) / 6)**alpha
    coverage: float = 0.0  # β of GNMT's coverage penalty β Σ_j log min(Σ_i α_ij, 1) (0: none)
    max_len_ratio: float = 2.0  # target at most ratio * source tokens + 10
    # sentences decoding at once (sorted by length; 128: the fastest measured at beam 5 on CPU,
    # see docs/benchmarks.md)
    batch_size: int = 128
    n_best: int = 1  # hypotheses returned per sentence (<= beam)
    max_source_len: int = 200  # longer inputs are translated in consecutive pieces of this many tokens
    # bf16: matrix products in bf16 (autocast), log-softmax in fp32; auto: bf16 where it
    # measures faster on this machine, else fp32 (engine/precision.py)
    precision: DecodePrecision = "auto"
    # the rows word links (alignment, html tags, replace-unk) are read from: the attention, the
    # alignment head (model.alignment_head), gradient x input saliency, or the mean of saliency and
    # the attention (the head's where the model has one); None: the head where the model has one,
    # else the attention (engine/decode/translator.py)
    links: Optional[Links] = None
    # searches running at once on a CPU, each a thread with one core's worth of products and its
    # share of the batches, the model shared (Marian's --cpu-threads); 0: one per intra-op thread
    # (torch.get_num_threads()); on a GPU always 1 (engine/decode/translator.py)
    workers: int = 0
    sample: int = 0  # N translations drawn a source instead of searched for (engine/decode/sampling.py)
    temperature: float = 1.0  # sample: p^(1/T), renormalised
    top_k: int = 0  # sample: from the K most probable words only (0: all)
    top_p: float = 1.0  # sample: from the nucleus of mass P only (1: all)
    seed: int = 0  # sample: the seed of the draws

    def problem(self) -> Optional[tuple[str, str]]:
        """(option, what is wrong) for the first value out of its range, or None."""
        checks = (("beam", 1 <= self.beam <= MAX_BEAM, f"must be in 1..{MAX_BEAM}"),
                  ("n_best", 1 <= self.n_best <= self.beam, f"must be in 1..beam ({self.beam})"),
                  ("alpha", 0.0 <= self.alpha < float("inf"), "must be >= 0 (0: raw log-probability)"),
                  ("coverage", 0.0 <= self.coverage < float("inf"), "must be >= 0 (0: no coverage penalty)"),
                  ("max_len_ratio", 0.0 < self.max_len_ratio < float("inf"), "must be positive"),
                  ("batch_size", self.batch_size >= 1, "must be >= 1"),
                  ("max_source_len", self.max_source_len >= 1, "must be >= 1"),
                  ("workers", self.workers >= 0, "must be >= 0 (0: one per thread)"),
                  ("sample", 0 <= self.sample <= MAX_BEAM, f"must be in 0..{MAX_BEAM} (0: search)"),
                  ("temperature", 0.0 < self.temperature < float("inf"), "must be > 0"),
                  ("top_k", self.top_k >= 0, "must be >= 0 (0: every word)"),
                  ("top_p", 0.0 < self.top_p <= 1.0, "must be in (0, 1] (1: every word)"))
        return next(((key, why) for key, ok, why in checks if not ok), None)


@dataclass
class Config:
    """A whole run: sections data, vocab, model, train, decode (every key is listed in
    docs/api.md under Configuration keys), plus ``model_dir`` and an optional ``preset``."""

    data: DataConfig = field(default_factory=DataConfig)
    vocab: VocabConfig = field(default_factory=VocabConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    preset: Optional[str] = None
    model_dir: str = "runs/model"
    # true: the paper's plain code only (nn/), every speed path of engine/accel/ off (the fused and
    # stacked encoder loops, tanh as a sigmoid, the in-flight batched search, int8, shortlists,
    # CUDA graphs, train.compile); the same translations, slower (--plain)
    plain: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def save(self, path: str | Path) -> None:
        from rnnsearch.io import atomic_write_text

        atomic_write_text(path, json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n")


# Presets: starting points a config file refines. `paper` is Appendix A/B of the
# paper; the small ones are sized for a laptop CPU.
PRESETS: dict[str, dict[str, Any]] = {
    "paper": {
        "model": {"emb": 620, "hidden": 1000, "align": 1000, "maxout": 500, "init": "paper"},
        "vocab": {"kind": "word", "size": 30000},
        "train": {"optimizer": "adadelta", "lr": 1.0, "batch_size": 80, "batching": "paper"},
    },
    "small": {
        "model": {"emb": 256, "hidden": 256, "align": 256, "maxout": 256,
                  "dropout_emb": 0.2, "dropout_hidden": 0.2, "dropout_readout": 0.3},
        "vocab": {"kind": "bpe", "size": 8000},
        "train": {"optimizer": "adam", "lr": 0.001, "batch_size": 64},
    },
    "tiny": {  # products this small gain nothing from bf16: fp32, the same on every machine
        "model": {"emb": 32, "hidden": 32, "align": 32, "maxout": 32},
        "vocab": {"kind": "word", "size": 1000},
        "train": {"optimizer": "adam", "lr": 0.003, "batch_size": 32, "batching": "bucket",
                  "precision": "fp32"},
        "decode": {"precision": "fp32"},
    },
}


def _describe(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin is typing.Union:
        return " or ".join(_describe(a) for a in typing.get_args(tp))
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """Check `value` against the annotation `tp`; return it (ints widen to floats)."""
    origin = typing.get_origin(tp)
    if origin is typing.Union:
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(value, a, where)
            except ConfigError:
                pass
        raise ConfigError(f"{where}: expected {_describe(tp)}, got {_show(value)}")
    if origin is Literal:
        if value in typing.get_args(tp):
            return value
        raise ConfigError(f"{where}: expected one of {_describe(tp)}, got {_show(value)}")
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
    raise ConfigError(f"{where}: expected {_describe(tp)}, got {_show(value)}")


def merge_dicts(base: dict, update: dict) -> dict:
    """`update` over `base`, nested sections merged key by key (neither input is changed)."""
    out = dict(base)
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge_dicts(out[k], v)
        else:
            out[k] = v
    return out


def _build(cls: type, raw: Any, where: str, source: str) -> Any:
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: {where or 'config'} must be a mapping, got {_show(raw)}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in raw.items():
        path = f"{where}.{key}" if where else str(key)
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else f" (known: {', '.join(names)})"
            raise ConfigError(f"{source}: unknown key '{path}'{hint}")
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            kwargs[key] = _build(typing.cast(type, tp), value, path, source)
        else:
            kwargs[key] = _coerce(value, tp, f"{source}: {path}")
    return cls(**kwargs)


# Before model.alignment_head took one of its five values it was three booleans: these two, and
# alignment_head itself true or false. Saved model directories still hold them (upgrade_saved).
_OLD_HEAD_KEYS = ("alignment_head_future", "alignment_head_refine")
_HEAD_VALUES = " | ".join(ALIGNMENT_HEADS)


def upgrade_saved(raw: Any) -> Any:
    """A saved config.json as this version reads it: an older rnnsearch's three booleans for the
    alignment head (model.alignment_head, _future, _refine) become the one key model.alignment_head
    (false: none; true: past, or future with _future; +refine with _refine). Anything else is left
    as it is, for config_from_dict to check."""
    model = raw.get("model") if isinstance(raw, dict) else None
    if not isinstance(model, dict) or not isinstance(model.get("alignment_head"), bool):
        return raw
    flags = [model.get(k, False) for k in _OLD_HEAD_KEYS]
    if not all(isinstance(f, bool) for f in flags):
        return raw
    model = {k: v for k, v in model.items() if k not in _OLD_HEAD_KEYS}
    future, refine = flags
    model["alignment_head"] = ("none" if not model["alignment_head"] else
                               ("future" if future else "past") + ("+refine" if refine else ""))
    return {**raw, "model": model}


def _refuse_old_head_keys(raw: dict, source: str) -> None:
    """A clear error for the alignment head's old booleans in a config or --set (a saved model
    directory's are upgraded instead, upgrade_saved)."""
    model = raw.get("model")
    if not isinstance(model, dict):
        return
    old = [k for k in _OLD_HEAD_KEYS if k in model]
    if isinstance(model.get("alignment_head"), bool):
        old.insert(0, "alignment_head")
    if old:
        raise ConfigError(f"{source}: model.{old[0]}: the alignment head is one key, model.alignment_head: "
                          f"{_HEAD_VALUES} (the old alignment_head true is past; with alignment_head_future "
                          f"true, future; with alignment_head_refine true, add +refine)")


def _validate_alignment(cfg: Config, need: Callable[[bool, str, str], None]) -> None:
    """The alignment head and guided alignment (engine/train/guided.py): what each needs."""
    m, t = cfg.model, cfg.train
    head = m.alignment_head != "none"
    need(not head or (m.arch == "rnnsearch" and bool(t.guided_alignment)),
         "model.alignment_head", "is trained by train.guided_alignment (and needs model.arch rnnsearch)")
    if not t.guided_alignment:
        return
    need(m.arch == "rnnsearch", "train.guided_alignment", f"needs attention: model.arch rnnsearch, "
         f"not {m.arch}")
    need(not t.agreement, "train.guided_alignment", "does not combine with train.agreement")
    need(cfg.data.prepared, "train.guided_alignment", "reads the links of prepared pairs: needs "
         "data.prepared")
    need(t.guided_alignment_weight > 0, "train.guided_alignment_weight", "must be positive")
    need(t.guided_alignment_shift in (0, 1), "train.guided_alignment_shift", "must be 0 or 1")
    need(not (head and t.guided_alignment_shift), "train.guided_alignment_shift",
         "must be 0 with model.alignment_head (its row for y_i already reads y_i)")
    need(t.guided_alignment_half_life >= 0, "train.guided_alignment_half_life",
         "must be >= 0 (0: constant)")


def _validate(cfg: Config, source: str) -> None:
    def need(ok: bool, key: str, why: str) -> None:
        if not ok:
            raise ConfigError(f"{source}: {key}: {why}")

    m, t, v, d = cfg.model, cfg.train, cfg.vocab, cfg.decode
    need(not (cfg.plain and t.compile), "train.compile", "is a speed path, and plain: true turns them off")
    for key in ("emb", "hidden", "align", "maxout"):
        need(getattr(m, key) > 0, f"model.{key}", "must be a positive integer")
    for key in ("dropout_emb", "dropout_hidden", "dropout_readout", "dropout_state", "dropout_dec_state",
                "word_dropout", "word_dropout_target"):
        need(0.0 <= getattr(m, key) < 1.0, f"model.{key}", "must be in [0, 1)")
    need(v.size >= 8, "vocab.size", "must be at least 8")
    need(0.0 < v.character_coverage <= 1.0, "vocab.character_coverage", "must be in (0, 1]")
    need(t.batch_size > 0, "train.batch_size", "must be positive")
    need(t.lr > 0, "train.lr", "must be positive")
    assert t.eps is not None  # resolved by TrainConfig.__post_init__
    need(t.eps > 0, "train.eps", "must be positive")
    need(t.clip_norm >= 0, "train.clip_norm", "must be >= 0 (0 disables clipping)")
    need(0.0 <= t.label_smoothing < 1.0, "train.label_smoothing", "must be in [0, 1)")
    need(t.agreement >= 0, "train.agreement", "must be >= 0 (0: off)")
    if t.agreement:  # the two directions' attention: RNNsearch only, each source read in order
        need(m.arch == "rnnsearch", "train.agreement", f"needs attention: model.arch rnnsearch, not {m.arch}")
        need(not cfg.data.reverse_source, "train.agreement", "does not combine with data.reverse_source")
    _validate_alignment(cfg, need)
    need(0.0 < t.lr_decay <= 1.0, "train.lr_decay", "must be in (0, 1]")
    need(t.sort_k >= 1, "train.sort_k", "must be >= 1")
    need(t.dropout_start >= 0, "train.dropout_start", "must be >= 0 (0: dropout from the first step)")
    need(t.max_epochs >= 0 and t.max_steps >= 0, "train.max_epochs", "limits must be >= 0")
    need(t.max_epochs > 0 or t.max_steps > 0 or t.max_minutes > 0, "train.max_epochs",
         "0 with no train.max_steps or train.max_minutes would train forever: set one of them")
    need(m.init_scale > 0, "model.init_scale", "must be positive")
    need(t.stop_valid_loss >= 0, "train.stop_valid_loss", "must be >= 0 (0: off)")
    need(t.save_every_minutes >= 0, "train.save_every_minutes", "must be >= 0 (0: off)")
    need(t.device == "auto" or t.device == "cpu" or t.device.startswith("cuda"),
         "train.device", f"expected auto, cpu, cuda or cuda:N, got {t.device!r}")
    bad = d.problem()
    if bad is not None:
        need(False, f"decode.{bad[0]}", f"{bad[1]}, got {getattr(d, bad[0])!r}")
    need(cfg.data.max_len >= 1, "data.max_len", "must be >= 1")
    need(cfg.data.prepare_workers >= 0, "data.prepare_workers", "must be >= 0 (0: every core)")
    need(v.sample_pairs >= 0, "vocab.sample_pairs", "must be >= 0 (0: every pair)")
    from sacrebleu.metrics.bleu import BLEU

    need(cfg.data.bleu_tokenize in BLEU.TOKENIZERS, "data.bleu_tokenize",
         f"unknown sacrebleu tokenizer {cfg.data.bleu_tokenize!r} (choose from {', '.join(BLEU.TOKENIZERS)})")
    if cfg.data.train_tsv is None and (cfg.data.train_src is None) != (cfg.data.train_tgt is None):
        raise ConfigError(f"{source}: data: give both train_src and train_tgt (or train_tsv)")


def parse_override(text: str) -> tuple[list[str], Any]:
    """`model.hidden=256` -> (["model", "hidden"], 256); the value is a YAML scalar."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected section.key=value")
    key, value = text.split("=", 1)
    try:
        parsed = _yaml(value) if value != "" else ""
    except yaml.YAMLError:
        parsed = value
    return key.strip().split("."), parsed


def apply_overrides(raw: dict, overrides: Sequence[str] = ()) -> dict:
    """A copy of the nested dict `raw` with each ``section.key=value`` of `overrides` set."""
    raw = copy.deepcopy(raw or {})
    for text in overrides:
        keys, value = parse_override(text)
        node = raw
        for k in keys[:-1]:
            if not isinstance(node.get(k), dict):
                node[k] = {}
            node = node[k]
        node[keys[-1]] = value
    return raw


def config_from_dict(raw: dict, overrides: Sequence[str] = (), source: str = "config") -> Config:
    """A checked `Config` from nested dicts (as a YAML file would give), a ``preset`` name
    resolved first and ``KEY=VALUE`` `overrides` applied last. Unknown keys, wrong types and
    out-of-range values raise ConfigError naming `source` and the key."""
    raw = apply_overrides(raw, overrides)
    preset = raw.get("preset")
    if preset is not None:
        if not isinstance(preset, str) or preset not in PRESETS:
            raise ConfigError(f"{source}: preset: unknown preset {preset!r} (known: {', '.join(PRESETS)})")
        raw = merge_dicts(PRESETS[preset], raw)
    _refuse_old_head_keys(raw, source)
    cfg = _build(Config, raw, "", source)
    _validate(cfg, source)
    return cfg


def decode_options(base: DecodeConfig, overrides: dict[str, Any],
                   name: Callable[[str], str] = str) -> DecodeConfig:
    """`base` with every value of `overrides` that is not None set over it: the one path of a
    decoding option from where a caller gives it. A value of the wrong type or out of range
    raises ConfigError naming the option as the caller spells it: `name` maps a key of
    DecodeConfig to that (str: the Python keyword; a CLI gives "--beam", serve the field)."""
    hints = typing.get_type_hints(DecodeConfig)
    values = {}
    for key, value in overrides.items():
        if key not in hints:
            known = ", ".join(f.name for f in dataclasses.fields(DecodeConfig))
            raise ConfigError(f"{name(key)}: not a decoding option (known: {known})")
        if value is not None:
            values[key] = _coerce(value, hints[key], name(key))
    options = dataclasses.replace(base, **values)
    bad = options.problem()
    if bad is not None:
        key, why = bad
        raise ConfigError(f"{name(key)}: {why}, got {_show(getattr(options, key))}")
    return options


def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> Config:
    """Read a YAML/JSON config file (or none: defaults) and apply `--set` overrides."""
    if path is None:
        return config_from_dict({}, overrides, source="--set")
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not valid UTF-8 ({e.reason} at byte {e.start})") from None
    try:
        raw = _yaml(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{where}: invalid YAML ({getattr(e, 'problem', e)})") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    return config_from_dict(raw, overrides, source=str(path))
