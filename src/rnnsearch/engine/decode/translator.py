"""Translation with a trained model: the Python API behind ``rnnsearch translate``.

    >>> import rnnsearch
    >>> model = rnnsearch.load("runs/multi30k")
    >>> [t.text for t in model.translate(["Ein Hund läuft."], beam=5)]
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import torch

from rnnsearch.config import ConfigError, DecodeConfig, decode_options
from rnnsearch.engine.align.links import (
    DEFAULT_SHIFT,
    hard_links,
    translation_rows,
    unknown_target_words,
)
from rnnsearch.engine.align.links import replace_unk as _replace_unk
from rnnsearch.engine.checkpoint import load_model_dir
from rnnsearch.engine.data.parallel import iterate_sorted, normalize, pad
from rnnsearch.engine.data.vocab import PAD
from rnnsearch.engine.decode.graphs import GraphedStep
from rnnsearch.engine.distributed import resolve_device
from rnnsearch.engine.precision import choose, model_size
from rnnsearch.io import MissingFileError
from rnnsearch.nn.search import SearchOptions, search_stream


@dataclass
class Translation:
    """One translation.

    Links and weights over words (:attr:`alignment`, :meth:`links`, :meth:`alignment_weights`)
    index words as Python's ``str.split()`` gives them: source word i is ``source.split()[i]``,
    the line as given to translate() (before cleaning: a word that cleaning splits in two keeps
    one index, one it removes gets no link), target word j is ``text.split()[j]``, the output as
    printed (a sentencepiece "⁇" is a word). With ``subwords=True`` they index ``source_tokens``
    and ``tokens``. All are computed from `attention` when asked, and are None where there is
    none (``translate(..., attention=False)``, an RNNencdec model, a source past
    MAX_ATTENTION_CELLS)."""

    text: str  # detokenised
    tokens: list[str]  # target pieces/words
    score: float  # length-normalised log-probability
    source_tokens: list[str] = field(default_factory=list)
    attention: Optional[list[list[float]]] = None  # (len(tokens) + 1) rows (</s> last) x len(source_tokens)
    source: str = ""  # the source line as given to translate()
    pieces_are_words: Optional[bool] = None  # a word vocabulary's; None: no piece starts with "▁"
    # the rows of decode.links other than the attention, shaped as `attention`: the alignment
    # head's β (model.alignment_head), the saliency (Translator._saliency) or their mean; links
    # and alignment weights are read from them (row i already belongs to y_i: no shift)
    aligned: Optional[list[list[float]]] = None
    # the attention row that links y_i: α_{i+shift}, the model's train.guided_alignment_shift
    shift: int = DEFAULT_SHIFT

    def attention_json(self) -> Optional[dict]:
        """SPEC form: {"source": [...], "target": [...], "weights": [[...] per target token]}."""
        if self.attention is None:
            return None
        if not self.tokens and not self.source_tokens:  # an empty input line
            return {"source": [], "target": [], "weights": []}
        return {"source": self.source_tokens, "target": self.tokens + ["</s>"], "weights": self.attention}

    @property
    def alignment(self) -> Optional[list[tuple[int, int]]]:
        """Word-level hard links (source word, target word), 0-based, sorted by source then
        target: each word of ``text.split()`` linked to the word of ``source.split()`` with the
        most attention, by the model's row (:attr:`shift`). None without attention."""
        return self.links()

    def words(self, subwords: bool = False) -> tuple[list[str], list[str]]:
        """The units link indices count: (``source.split()``, ``text.split()``), or with
        `subwords` (source_tokens, tokens)."""
        if subwords:
            return list(self.source_tokens), list(self.tokens)
        return self.source.split(), self.text.split()

    def _word_vocab(self) -> bool:
        if self.pieces_are_words is not None:
            return self.pieces_are_words
        return not any(p.startswith("▁") for p in self.source_tokens + self.tokens)

    def alignment_weights(self, subwords: bool = False,
                          shift: Optional[int] = None) -> Optional[list[list[float]]]:
        """Soft alignment: one row per target unit (:meth:`words`), one weight per source unit.
        Word level, a source word's weight is the sum over its pieces, a target word's row the
        mean of its pieces' rows. ``shift=1`` gives each unit the next unit's row (the </s> row
        for the last: alignment.attention_links); None: :attr:`shift`, the model's. The </s> row
        is never a unit."""
        if self.aligned is not None:
            return translation_rows(self.aligned, self.source, self.source_tokens, self.tokens,
                                    len(self.text.split()), self._word_vocab(), subwords, 0)
        if self.attention is None:
            return None
        return translation_rows(self.attention, self.source, self.source_tokens, self.tokens,
                                len(self.text.split()), self._word_vocab(), subwords,
                                self.shift if shift is None else shift)

    def links(self, subwords: bool = False, shift: Optional[int] = None) -> Optional[list[tuple[int, int]]]:
        """Hard links (source unit, target unit): each target unit's highest-weight source unit in
        :meth:`alignment_weights`, sorted by source then target (Pharaoh order)."""
        rows = self.alignment_weights(subwords, shift)
        return None if rows is None else hard_links(rows)

    def replace_unk(self, lexicon: Optional[dict[str, str]] = None, shift: Optional[int] = None,
                    lowercase: bool = False) -> Translation:
        """This translation with each unknown output word ("<unk>" of a word vocabulary, "⁇" of a
        sentencepiece model) replaced by the lexicon's translation of its linked source word, or
        that word copied (alignment.replace_unk). Looked up as given, then as the model reads it
        (normalised; lower-cased with `lowercase`, a model's data.lowercase). Only `text`
        changes (its words keep their indices); without attention or unknown words, self."""
        from rnnsearch.engine.data.parallel import normalize

        words = self.text.split()
        unknown = unknown_target_words(self.tokens, self._word_vocab(), len(words))
        links = self.links(shift=shift) if unknown else None
        if links is None:
            return self
        words = _replace_unk(words, unknown, links, self.source.split(), lexicon,
                            key=lambda w: normalize(w, lowercase))
        return dataclasses.replace(self, text=" ".join(words))


# target rows x source columns kept per sentence (dense JSON beyond is useless)
MAX_ATTENTION_CELLS = 4_000_000
log = logging.getLogger("rnnsearch")


class Translator:
    """A loaded model with its tokenisers and decoding defaults (``cfg.decode``), complete as
    constructed: `quantize` "int8" swaps the decoder's products (engine/decode/quantize.py), `graphs`
    replays decoding steps (engine/decode/graphs.py), `shortlist` restricts the output layer
    (engine/decode/shortlist.py); :func:`load` makes all three from a model directory."""

    def __init__(self, cfg, model, src_tok, tgt_tok, device: torch.device, *,
                 model_dir: Optional[str | Path] = None, quantize: str = "none",
                 graphs: Optional[GraphedStep] = None, shortlist: Optional[Any] = None):
        self.cfg, self.model, self.src_tok, self.tgt_tok, self.device = cfg, model, src_tok, tgt_tok, device
        self._auto_precision: Optional[str] = None  # what "auto" chose, once per Translator
        self.parameters = model.num_parameters()  # counted before any int8 swap (they keep their number)
        self.model_dir = None if model_dir is None else Path(model_dir)  # where load() read it from
        self.quantized = quantize  # "none", or "int8": the decoder's products swapped, here
        if quantize == "int8":
            from rnnsearch.engine.decode.quantize import quantize_int8_

            quantize_int8_(model)
        self.graphs = graphs  # decoding steps replayed from CUDA graphs (or their padding, eagerly)
        self.shortlist = shortlist  # the output layer over a lexical shortlist

    def options(self, base: Optional[DecodeConfig] = None, name=str, **overrides: Any) -> DecodeConfig:
        """The decoding options of a call: `base` (default ``cfg.decode``) with `overrides` (keys
        of config.DecodeConfig) set, checked by config.decode_options, and the link rows asked
        for checked against this model; a bad value is a ConfigError naming the option as
        `name` spells it (a CLI flag, an HTTP field; default: the Python keyword)."""
        options = decode_options(base or self.cfg.decode, overrides, name)
        refusal = self.links_refusal(options.links)
        if refusal:
            raise ConfigError(f"{name('links')}: {refusal}")
        return options

    def link_rows(self, links: Optional[str]) -> str:
        """Where links are read from: `links` (decode.links), else the alignment head where the
        model has one, else the attention."""
        if links is not None:
            return links
        return "head" if self.model.align_head is not None else "attention"

    def link_shift(self, links: Optional[str]) -> int:
        """The row that links y_i among the `links` rows: α_{i+shift} with the shift the model was
        guided with (train.guided_alignment_shift); the head's and saliency's row i is y_i's."""
        return self.cfg.train.guided_alignment_shift if self.link_rows(links) == "attention" else 0

    def links_refusal(self, links: Optional[str]) -> Optional[str]:
        """Why this model cannot give the `links` rows, or None."""
        if links == "head" and self.model.align_head is None:
            return (f"'head' reads the alignment head, and {self.model_dir or 'this model'} has none "
                    "(model.alignment_head): choose attention, saliency or mean")
        if links in ("saliency", "mean") and self.quantized != "none":
            return (f"saliency takes gradients through the model; its {self.quantized} products have "
                    "none (load it without quantization)")
        return None

    def resolve_precision(self, precision: Optional[str] = None) -> str:
        """fp32 or bf16: `precision`, else decode.precision; "auto" measures which decodes
        faster here (engine/precision.py), once."""
        precision = decode_options(self.cfg.decode, {"precision": precision}).precision
        if self.quantized != "none":  # int8 products; what is left (softmaxes, gates) stays fp32
            return "fp32"
        if precision != "auto":
            return precision
        if self._auto_precision is None:
            size = model_size(self.cfg, len(self.src_tok), len(self.tgt_tok), f"beam {self.cfg.decode.beam}")
            self._auto_precision = choose("decode", self.device, size, self._probe)
        return self._auto_precision

    def _probe(self, precision: str) -> float:
        """Seconds to decode 32 fixed 16-piece sources with the model's beam in `precision`."""
        g = torch.Generator().manual_seed(0)
        pieces = torch.randint(4, len(self.src_tok), (32, 16), generator=g).tolist()
        options = SearchOptions(dataclasses.replace(self.cfg.decode, n_best=1), with_attention=False)
        start = time.perf_counter()
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            self._decode(pieces, options, 32, graphs=False)  # eager either way: captures are not decoding
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter() - start

    def source_ids(self, text: str) -> list[int]:
        """The source pieces the model reads for `text`, in reading order: the text normalised
        (and lower-cased) as in training, then tokenised. Every path that turns a source sentence
        into pieces goes through here (translate, force, attention labels)."""
        return self.src_tok.encode(normalize(text, self.cfg.data.lowercase))

    def target_ids(self, text: str) -> list[int]:
        """A given translation's target pieces, normalised as in training (for `force`)."""
        return self.tgt_tok.encode(normalize(text, self.cfg.data.lowercase))

    def labels(self, source: str, target: str) -> tuple[list[str], list[str]]:
        """The column and row labels of ``force([source], [target])``'s weights: the source
        pieces, and the target pieces followed by ``</s>``."""
        return (self.src_tok.pieces(self.source_ids(source)),
                self.tgt_tok.pieces(self.target_ids(target)) + ["</s>"])

    def translate(self, sentences: Iterable[str], options: Optional[DecodeConfig] = None, *,
                  attention: bool = True, early_stop: Optional[bool] = None, **overrides: Any) -> list[Any]:
        """Translate sentences; an empty sentence gives an empty translation.

        The decoding options are `options` (default: the model's decode section) with
        `overrides` set over them, any key of config.DecodeConfig: ``beam=5``, ``n_best``,
        ``alpha``, ``max_len_ratio``, ``batch_size``, ``precision``, ``max_source_len``, ``links``
        (the rows links are read from: "attention", "head", "saliency" (gradient x input,
        :meth:`force`) or "mean"; default the head where the model has one). A bad value raises
        ConfigError naming it. Returns one Translation per sentence, or (n_best > 1) a list of
        n_best per sentence (typed ``list[Any]`` for that reason).
        A source longer than ``max_source_len`` tokens is translated in consecutive
        pieces of that length and the pieces joined (its attention is then block-diagonal),
        so no input can stall the decoder and every line gets a translation. `early_stop`: see
        :func:`rnnsearch.nn.search.beam_search` (default: only where it cannot change the result).
        """
        d = self.options(options, **overrides)
        links, n_best = self.link_rows(d.links), d.n_best
        sentences = list(sentences)
        pieces: list[list[int]] = []  # reading-order token ids of every piece
        owner: list[int] = []  # the sentence each piece belongs to
        for k, text in enumerate(sentences):
            ids = self.source_ids(text)
            for start in range(0, len(ids), d.max_source_len):
                pieces.append(ids[start:start + d.max_source_len])
                owner.append(k)
        precision = self.resolve_precision(d.precision)
        # bf16: the matrix products (the output layer above all) in bf16, the softmaxes in fp32
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            hyps = self._decode(pieces, SearchOptions(d, attention, early_stop), d.batch_size,
                                workers=self.workers(d.workers))
        out: list[list[Translation]] = [[Translation("", [], 0.0, [], [] if attention else None)
                                         for _ in range(n_best)] for _ in sentences]
        by_sentence: dict[int, list[int]] = {}
        for p, k in enumerate(owner):
            by_sentence.setdefault(k, []).append(p)
        heads: list[tuple[Translation, list[int], list[int]]] = []  # (translation, source, target ids)
        for k, ps in by_sentence.items():
            out[k] = [self._result([pieces[p] for p in ps], [hyps[p][rank] for p in ps], attention)
                      for rank in range(n_best)]
            if attention and links != "attention" and len(ps) == 1:
                heads += [(t, pieces[ps[0]], hyps[ps[0]][rank].tokens) for rank, t in enumerate(out[k])]
        if heads:  # the head's (or saliency) rows of each output, by teacher forcing it (batched)
            rows = self._forced([(src, tgt) for _, src, tgt in heads], links=links)
            for (t, _, _), r in zip(heads, rows):
                t.aligned = r
        word_vocab, shift = self.cfg.vocab.kind == "word", self.link_shift(links)
        for text, ts in zip(sentences, out):
            for t in ts:
                t.source, t.pieces_are_words, t.shift = text, word_vocab, shift
        return [o[0] for o in out] if n_best == 1 else out

    def workers(self, workers: int = 0) -> int:
        """Searches to run at once: `workers` (decode.workers), 0 meaning one per intra-op thread;
        1 on a GPU, where one search already fills the device."""
        if self.device.type != "cpu":
            return 1
        return workers or torch.get_num_threads()

    def _decode(self, pieces: list[list[int]], options: SearchOptions, batch_size: int,
                graphs: bool = True, workers: int = 1) -> list:
        """Beam search over source pieces (reading order), batched by length; n-best per piece.
        With `workers` > 1 the length-sorted batches are dealt out in turn to that many searches,
        each in a thread of its own (:func:`on_cores`)."""
        rev = self.cfg.data.reverse_source
        self.model.eval()
        # Sorted by length; the searches keep `batch_size` sentences in flight between them, each
        # its `size` (fewer sentences than that: an equal part of them each), the next joining as
        # others finish, and encode each group when its first sentence is needed.
        workers = max(1, min(workers, len(pieces), batch_size))
        size = max(1, -(-min(batch_size, len(pieces)) // workers))
        groups = list(iterate_sorted(pieces, size))
        workers = max(1, min(workers, len(groups)))  # no sentence at all: one search, of nothing
        step = self.graphs if graphs and self.graphs is not None and self.shortlist is None else None
        allowed = None
        if self.shortlist is not None:
            shortlist, vocab = self.shortlist, len(self.tgt_tok)
            allowed = lambda src, mask: shortlist.allowed(src, mask, vocab)  # noqa: E731

        def search(share: list[list[int]]) -> list[tuple[int, list]]:
            """(piece, its n-best) for the pieces of these groups, decoded as one stream."""
            order = [p for group in share for p in group]  # stream position -> piece

            def chunks():
                for group in share:
                    src = pad([pieces[p][::-1] if rev else pieces[p] for p in group]).to(self.device)
                    yield src, src != PAD

            return [(order[k], nbest) for k, nbest in search_stream(
                self.model, chunks(), options, capacity=size, step=step, shortlist=allowed)]

        hyps: list = [None] * len(pieces)
        shares = [groups[w::workers] for w in range(workers)]
        for p, nbest in (search(groups) if workers == 1 else on_cores(search, shares)):
            hyps[p] = nbest
        return hyps

    def _result(self, pieces: list[list[int]], hyps: list, attention: bool) -> Translation:
        """One Translation from the hypotheses of a sentence's consecutive source pieces."""
        rev = self.cfg.data.reverse_source
        src_ids = [t for piece in pieces for t in piece]
        tokens = [t for h in hyps for t in h.tokens]
        n_tgt = sum(len(h.tokens) for h in hyps)
        score = sum(h.score * (len(h.tokens) + 1) for h in hyps) / (n_tgt + len(hyps))
        weights = None
        cells = (n_tgt + 1) * len(src_ids)
        if attention and cells > MAX_ATTENTION_CELLS:
            log.warning("attention of a %d-token source is not kept (%s weights; limit %s)", len(src_ids),
                        f"{cells:,}", f"{MAX_ATTENTION_CELLS:,}")
        elif attention and all(h.attention is not None for h in hyps):
            weights, before = [], 0
            for piece, h in zip(pieces, hyps):
                after = len(src_ids) - before - len(piece)
                rows = h.attention if h is hyps[-1] else h.attention[:-1]  # one </s> row, the last
                rows = [row[::-1] if rev else row for row in rows]  # columns in reading order
                weights += [[0.0] * before + list(r) + [0.0] * after for r in rows]
                before += len(piece)
        return Translation(self.tgt_tok.decode(tokens), self.tgt_tok.pieces(tokens), score,
                           self.src_tok.pieces(src_ids), weights)

    def force(self, sources: list[str], targets: list[str], batch_size: int = 64,
              links: str = "attention") -> list[Optional[list[list[float]]]]:
        """Attention under teacher forcing on given translations (for alignment scoring).

        Returns per pair the weights, one row per target token plus </s>, columns in the
        source's reading order (also with reverse_source); None for RNNencdec. `links` (as
        decode.links; None: the model's default): "head", the alignment head's β rows instead
        (model.alignment_head; its </s> row is zero); "saliency", rows of gradient × input
        saliency (:meth:`_saliency`); "mean", the mean of those and the attention's (the head's
        where the model has one), cell by cell.
        """
        pairs = [(self.source_ids(s), self.target_ids(t)) for s, t in zip(sources, targets, strict=True)]
        return self._forced(pairs, batch_size, self.options(links=links).links)

    @torch.no_grad()
    def _forced(self, pairs: list[tuple[list[int], list[int]]], batch_size: int = 64,
                links: Optional[str] = "attention") -> list[Optional[list[list[float]]]]:
        """force() on (source ids in reading order, target ids) pairs."""
        from rnnsearch.engine.data.parallel import Example, collate

        links = self.link_rows(links)
        refusal = self.links_refusal(links)
        if refusal:
            raise ConfigError(f"links: {refusal}")
        saliency = links in ("saliency", "mean")
        # "mean" averages the saliency with the rows links are otherwise read from: the head's if any
        head = links == "head" or (links == "mean" and self.model.align_head is not None)
        self.model.eval()
        rev = self.cfg.data.reverse_source
        examples = [Example(src[::-1] if rev else list(src), list(tgt), k)
                    for k, (src, tgt) in enumerate(pairs)]
        out: list = [[] for _ in examples]  # an empty source has no attention rows
        todo = [k for k, e in enumerate(examples) if e.src]
        for group in iterate_sorted([examples[k].src for k in todo], batch_size):
            group = [todo[g] for g in group]
            batch = collate([examples[g] for g in group]).to(self.device)
            attn = self._saliency(batch) if saliency else None
            if links != "saliency":  # the attention (or head) rows
                _, weights, *beta = self.model(batch.src, batch.src_mask, batch.tgt_in, alignment_head=head)
                weights = beta[0] if head else weights
                attn = weights if attn is None else (attn + weights) / 2  # None both, for RNNencdec
            if attn is None:
                return [None] * len(examples)
            for row, g in enumerate(group):
                e = examples[g]
                w = attn[row, : len(e.tgt) + 1, : len(e.src)]
                if self.cfg.data.reverse_source:
                    w = w.flip(-1)
                out[g] = w.tolist()
        return out

    @torch.enable_grad()
    def _saliency(self, batch) -> Optional[torch.Tensor]:
        """Gradient × input saliency (Ding et al. 2019) of each source token for each gold
        target token: row i, column j is |∂ log p(y_i | y_<i, x) / ∂E x_j · E x_j|, the
        source embedding's first-order share in the prediction of y_i, normalised over the
        sentence. Row i is the prediction of token i (like α_i, made before the decoder read
        y_i), the last row that of </s>. Unlike attention it counts every path from x_j to
        y_i: through α_i, but also through the annotations that earlier states read.
        None for RNNencdec, which has no attention rows to stand beside."""
        if self.cfg.model.arch != "rnnsearch":
            return None
        kept: list[torch.Tensor] = []

        def keep(module, inputs, output):  # the embeddings E x_j, as a leaf the gradient reaches
            output = output.detach().requires_grad_(True)
            kept.append(output)
            return output

        hook = self.model.src_emb.register_forward_hook(keep)
        try:
            logp, _ = self.model(batch.src, batch.src_mask, batch.tgt_in)[:2]
        finally:
            hook.remove()
        emb = kept[0]
        gold = batch.tgt_out.clamp(min=0).unsqueeze(-1)
        picked = logp.gather(-1, gold).squeeze(-1)  # (B, T): log p of each gold token
        real = batch.tgt_out != PAD
        rows = []
        for i in range(picked.shape[1]):  # one backward per target position; the batch's
            # sentences are independent, so the sum's gradient is each sentence's own
            (grad,) = torch.autograd.grad(picked[:, i].masked_fill(~real[:, i], 0.0).sum(), emb,
                                          retain_graph=i + 1 < picked.shape[1])
            rows.append((grad * emb).sum(-1).abs())
        sal = torch.stack(rows, 1).masked_fill(~batch.src_mask.unsqueeze(1), 0.0)  # (B, T, S)
        return (sal / sal.sum(-1, keepdim=True).clamp(min=1e-30)).detach()


def on_cores(work: Callable[[Any], list], shares: list) -> list:
    """``work(share)`` for every share at once, each in a thread of its own that runs its tensor
    operations on one thread (torch.set_num_threads is per thread; the caller's count is set back
    after), under the caller's autocast; their results concatenated in order.

    A decoding step is many small operations whose Python and dispatch overhead leaves the other
    cores idle while one works: searches side by side on a core each keep them all busy (PyTorch
    releases the GIL inside every operation), where one search's two-thread products gained little
    (docs/benchmarks.md, "Searches side by side"). Marian decodes on a CPU the same way."""
    threads = torch.get_num_threads()
    bf16 = torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16

    def one(share: Any) -> list:
        torch.set_num_threads(1)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            return work(share)

    try:
        with ThreadPoolExecutor(len(shares), thread_name_prefix="rnnsearch-search") as pool:
            return [item for part in pool.map(one, shares) for item in part]
    finally:
        torch.set_num_threads(threads)


def load(model_dir: str | Path, device: str = "auto", quantize: str = "none",
         cuda_graphs: bool = False, shortlist: Optional[str | Path] = None) -> Translator:
    """Load a model directory written by ``rnnsearch train``; ``quantize="int8"`` decodes with
    int8 matrix products on the CPU (engine/decode/quantize.py), the files on disk untouched;
    ``cuda_graphs`` replays each decoding step from a CUDA graph (engine/decode/graphs.py; GPUs only;
    not with a shortlist, whose output layer changes size); ``shortlist`` (a file or "auto")
    restricts the output layer to a lexical shortlist (engine/decode/shortlist.py)."""
    from rnnsearch.engine.decode.quantize import KINDS

    if quantize not in KINDS:
        raise ConfigError(f"quantize must be one of {', '.join(KINDS)}, got {quantize!r}")
    dev = resolve_device(device)
    if quantize != "none" and dev.type != "cpu":
        raise ConfigError(f"--quantize {quantize} decodes on the CPU; the model was to load on {dev} "
                         "(give --device cpu)")
    if cuda_graphs and dev.type != "cuda":
        raise ConfigError(f"--cuda-graphs needs a CUDA device; the model was to load on {dev}")
    model_dir = Path(model_dir)
    cfg, model, src_tok, tgt_tok = load_model_dir(model_dir, dev)
    listed = None if shortlist is None else _shortlist(shortlist, model_dir, cfg, len(src_tok))
    return Translator(cfg, model, src_tok, tgt_tok, dev, model_dir=model_dir, quantize=quantize,
                      graphs=GraphedStep(model) if cuda_graphs else None, shortlist=listed)


def _shortlist(source: str | Path, model_dir: Path, cfg, src_vocab: int):
    """The lexical shortlist (engine/decode/shortlist.py) of a loaded model: a file, or "auto" for
    <model_dir>/shortlist.npz, built (and saved) from the training data when absent."""
    from rnnsearch.engine.decode.shortlist import FILE_NAME, build_shortlist, load_shortlist

    path = model_dir / FILE_NAME if str(source) == "auto" else Path(source)
    if str(source) == "auto" and not path.exists():
        build_shortlist(model_dir, cfg=cfg).save(path)
    elif not path.exists():
        raise MissingFileError(path, f"{path}: no such shortlist (rnnsearch shortlist build --model "
                                     f"{model_dir} --out {path}; or --shortlist auto)")
    return load_shortlist(path, model_dir, src_vocab, cfg.vocab)


def write_attention_jsonl(path: str | Path, translations: list[Translation]) -> None:
    from rnnsearch.io import atomic_write_text

    lines = [json.dumps(t.attention_json(), ensure_ascii=False) for t in translations]
    atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))
