"""Translation with a trained model: the Python API behind ``rnnsearch translate``.

    >>> import rnnsearch
    >>> model = rnnsearch.load("runs/multi30k")
    >>> [t.text for t in model.translate(["Ein Hund läuft."], beam=5)]
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import torch

from rnnsearch.config import ConfigError, DecodeConfig, decode_options
from rnnsearch.engine.accel.graphs import GraphedStep
from rnnsearch.engine.accel.inflight import search_stream
from rnnsearch.engine.accel.speedup import speed_up
from rnnsearch.engine.align.links import (
    DEFAULT_SHIFT,
    hard_links,
    translation_rows,
    unknown_target_words,
)
from rnnsearch.engine.align.links import replace_unk as _replace_unk
from rnnsearch.engine.align.saliency import saliency_rows
from rnnsearch.engine.data.parallel import iterate_sorted, normalize, pad
from rnnsearch.engine.data.vocab import PAD
from rnnsearch.engine.decode.constraints import constrained_search
from rnnsearch.engine.decode.sampling import sample
from rnnsearch.engine.decode.scoring import Score, ranked_score, score_pairs
from rnnsearch.engine.precision import PrecisionProbe
from rnnsearch.nn.search import SearchOptions, search_sentence


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
    # head's β (model.alignment_head), the saliency (engine/align/saliency.py) or their mean; links
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

    def _word_vocab(self) -> bool:
        if self.pieces_are_words is not None:
            return self.pieces_are_words
        return not any(p.startswith("▁") for p in self.source_tokens + self.tokens)

    def alignment_weights(self, subwords: bool = False,
                          shift: Optional[int] = None) -> Optional[list[list[float]]]:
        """Soft alignment: one row per target unit (a word of ``text.split()``, or with `subwords`
        a piece of `tokens`), one weight per source unit (of ``source.split()``, or `source_tokens`).
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


def attention_kept(n_tgt: int, n_src: int) -> bool:
    """Whether a translation's attention (n_tgt + 1 rows of n_src) is kept: not past
    MAX_ATTENTION_CELLS, which is said in the log."""
    cells = (n_tgt + 1) * n_src
    if cells > MAX_ATTENTION_CELLS:
        log.warning("attention of a %d-token source is not kept (%s weights; limit %s)", n_src,
                    f"{cells:,}", f"{MAX_ATTENTION_CELLS:,}")
        return False
    return True


class Translator:
    """A loaded model with its tokenisers and decoding defaults (``cfg.decode``), complete as
    constructed: `quantize` "int8" swaps the decoder's products (engine/accel/quantize.py), `graphs`
    replays decoding steps (engine/accel/graphs.py), `shortlist` restricts the output layer
    (engine/accel/shortlist.py); :func:`load` makes all three from a model directory."""

    def __init__(self, cfg, model, src_tok, tgt_tok, device: torch.device, *,
                 model_dir: Optional[str | Path] = None, quantize: str = "none",
                 graphs: Optional[GraphedStep] = None, shortlist: Optional[Any] = None):
        self.cfg, self.model, self.src_tok, self.tgt_tok, self.device = cfg, model, src_tok, tgt_tok, device
        self.parameters = model.num_parameters()  # counted before any int8 swap (they keep their number)
        self.model_dir = None if model_dir is None else Path(model_dir)  # where load() read it from
        self.quantized = quantize  # "none", or "int8": the decoder's products swapped, here
        if cfg.plain:  # the paper's code only: nn/search.py's search over nn/model.py as written
            asked = [flag for flag, on in (("--quantize int8", quantize != "none"), ("--cuda-graphs", graphs),
                                           ("--shortlist", shortlist)) if on]
            if asked:
                raise ConfigError(f"{', '.join(asked)}: a speed path, and plain: true (--plain) turns "
                                  "them off")
        else:
            speed_up(model)  # engine/accel/: the same translations, faster
        if quantize == "int8":
            from rnnsearch.engine.accel.quantize import quantize_int8_

            quantize_int8_(model)
        self.graphs = graphs  # decoding steps replayed from CUDA graphs (or their padding, eagerly)
        self.shortlist = shortlist  # the output layer over a lexical shortlist
        # decode.precision resolved, "auto" measured once by decoding fixed sources (engine/precision.py)
        self.precision = PrecisionProbe(cfg, device, (len(src_tok), len(tgt_tok)), self._probe_decode,
                                        quantize)

    def options(self, base: Optional[DecodeConfig] = None, name=str, **overrides: Any) -> DecodeConfig:
        """The decoding options of a call: `base` (default ``cfg.decode``) with `overrides` (keys
        of config.DecodeConfig) set, checked by config.decode_options, and the link rows asked
        for checked against this model; a bad value is a ConfigError naming the option as
        `name` spells it (a CLI flag, an HTTP field; default: the Python keyword)."""
        options = decode_options(base or self.cfg.decode, overrides, name)
        self.check_links(options.links, name)
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

    def check_links(self, links: Optional[str], name: Callable[[str], str] = str) -> None:
        """A ConfigError naming the option as `name` spells it (as in :meth:`options`) where this
        model cannot give the `links` rows: the head without one, saliency through int8 products."""
        if links == "head" and self.model.align_head is None:
            why = (f"'head' reads the alignment head, and {self.model_dir or 'this model'} has none "
                   "(model.alignment_head): choose attention, saliency or mean")
        elif links in ("saliency", "mean") and self.quantized != "none":
            why = (f"saliency takes gradients through the model; its {self.quantized} products have "
                   "none (load it without quantization)")
        else:
            return
        raise ConfigError(f"{name('links')}: {why}")

    def _probe_decode(self, pieces: list[list[int]]) -> None:
        """Decode `pieces` as the precision probe (engine/precision.py) times it: the model's beam,
        one hypothesis, no attention, eager either way (captures are not decoding)."""
        options = SearchOptions(dataclasses.replace(self.cfg.decode, n_best=1), with_attention=False)
        self._decode(pieces, options, len(pieces), graphs=False)

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
                  attention: bool = True, early_stop: Optional[bool] = None,
                  prefixes: Optional[list[Optional[str]]] = None,
                  constraints: Optional[list[Optional[list[str]]]] = None,
                  **overrides: Any) -> list[Translation]:
        """Translate sentences: the best translation of each; an empty sentence gives an empty one.

        Options: `options` (default: the model's decode section) with `overrides`, any key of
        config.DecodeConfig (``beam=5``, ``alpha``, ``links``, ``sample``, ...); a bad value raises
        ConfigError naming it, as does an n_best or sample above 1 (:meth:`translate_n_best`). A
        source over ``max_source_len`` tokens is translated in consecutive pieces, joined.
        `early_stop`: see :func:`rnnsearch.nn.search.beam_search`. `prefixes`: per sentence the
        text its translation must start with (None: free). `constraints`: per sentence the phrases
        its translation must contain (None or []: none; engine/decode/constraints.py).
        """
        d = self.options(options, **overrides)
        for key, value in (("n_best", d.n_best), ("sample", max(1, d.sample))):
            if value != 1:
                raise ConfigError(f"{key}: translate gives one translation a sentence, got {value} "
                                  "(translate_n_best gives the n best)")
        return [n_best[0] for n_best in self._translate(sentences, d, attention, early_stop, prefixes,
                                                        constraints)]

    def translate_n_best(self, sentences: Iterable[str], options: Optional[DecodeConfig] = None, *,
                         attention: bool = True, early_stop: Optional[bool] = None,
                         prefixes: Optional[list[Optional[str]]] = None,
                         constraints: Optional[list[Optional[list[str]]]] = None,
                         **overrides: Any) -> list[list[Translation]]:
        """:meth:`translate`, with each sentence's ``n_best`` best translations, best first.

        The options are translate's, n_best among them; n_best 1 gives lists of one."""
        return self._translate(sentences, self.options(options, **overrides), attention, early_stop,
                               prefixes, constraints)

    def _translate(self, sentences: Iterable[str], d: DecodeConfig, attention: bool,
                   early_stop: Optional[bool], prefixes: Optional[list[Optional[str]]] = None,
                   constraints: Optional[list[Optional[list[str]]]] = None) -> list[list[Translation]]:
        """translate_n_best with its options `d` checked."""
        links, n_best = self.link_rows(d.links), d.sample or d.n_best
        sentences = list(sentences)
        sources = [self.source_ids(text) for text in sentences]  # reading-order token ids
        forced = None if prefixes is None else self._prefix_ids(sources, prefixes, d)
        phrases = None if constraints is None else self._constraint_ids(sources, constraints, d, prefixes)
        pieces: list[list[int]] = []  # reading-order token ids of every piece
        owner: list[int] = []  # the sentence each piece belongs to
        starts: list[list[int]] = []  # the target ids each piece's translation starts with
        musts: list[list[list[int]]] = []  # the phrases each piece's translation must contain
        for k, ids in enumerate(sources):
            for n, piece in enumerate(self._split(ids, d.max_source_len)):
                pieces.append(piece)
                owner.append(k)
                starts.append(forced[k] if forced is not None and n == 0 else [])
                musts.append(phrases[k] if phrases is not None else [])
        precision = self.precision.resolve(d.precision)
        # bf16: the matrix products (the output layer above all) in bf16, the softmaxes in fp32
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            hyps = self._decode(pieces, SearchOptions(d, attention, early_stop), d.batch_size,
                                workers=self.workers(d.workers), prefixes=starts if forced else None,
                                constraints=musts if phrases is not None else None)
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
        return out

    def _split(self, ids: list[int], limit: int) -> list[list[int]]:
        """A source's ids in the consecutive pieces it is translated in, `limit` ids at most each."""
        return [ids[start:start + limit] for start in range(0, len(ids), limit)]

    def _source_batch(self, pieces: list[list[int]]) -> tuple[Any, Any]:
        """Source pieces (reading order) as the model reads them: (src, src_mask), padded (an
        ensemble's: a list of each, one a model)."""
        rev = self.cfg.data.reverse_source
        src = pad([p[::-1] if rev else p for p in pieces]).to(self.device)
        return src, src != PAD

    def workers(self, workers: int = 0) -> int:
        """Searches to run at once: `workers` (decode.workers), 0 meaning one per intra-op thread;
        1 on a GPU, where one search already fills the device."""
        if self.device.type != "cpu":
            return 1
        return workers or torch.get_num_threads()

    def _decode(self, pieces: list[list[int]], options: SearchOptions, batch_size: int,
                graphs: bool = True, workers: int = 1, prefixes: Optional[list[list[int]]] = None,
                constraints: Optional[list[list[list[int]]]] = None) -> list:
        """Beam search over source pieces (reading order), batched by length; n-best per piece.
        With `workers` > 1 the length-sorted batches are dealt out in turn to that many searches,
        each in a thread of its own (:func:`on_cores`). `prefixes`: per piece the target ids its
        translation starts with; `constraints`: the phrases (target ids) it must contain, by
        engine/decode/constraints.py's search."""
        rev = self.cfg.data.reverse_source
        self.model.eval()
        if options.decode.sample:  # drawn, not searched for (engine/decode/sampling.py)
            return self._sample(pieces, options)
        d = options.decode
        if self.cfg.plain and (d.coverage or d.length_penalty != "power"):
            raise ConfigError("coverage, length_penalty gnmt: the batched search's; not with plain: true")
        if d.coverage and self.cfg.model.arch != "rnnsearch":
            raise ConfigError("coverage: the penalty reads the attention, and an RNNencdec model has none")
        if self.cfg.plain:  # one sentence at a time, as Section 3.2 reads
            return [search_sentence(self.model, torch.tensor(p[::-1] if rev else p, device=self.device),
                                    options) for p in pieces]
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
            if constraints is not None:  # dynamic beam allocation, a group at a time
                return [(p, nbest) for group in share for p, nbest in zip(group, constrained_search(
                    self.model, *self._source_batch([pieces[p] for p in group]),
                    [constraints[p] for p in group], options))]
            order = [p for group in share for p in group]  # stream position -> piece
            return [(order[k], nbest) for k, nbest in search_stream(
                self.model, self._chunks(pieces, share, prefixes), options, capacity=size, step=step,
                shortlist=allowed)]

        hyps: list = [None] * len(pieces)
        shares = [groups[w::workers] for w in range(workers)]
        for p, nbest in (search(groups) if workers == 1 else on_cores(search, shares)):
            hyps[p] = nbest
        return hyps

    def _chunks(self, pieces: list[list[int]], groups: list[list[int]],
                prefixes: Optional[list[list[int]]]) -> Iterator[tuple]:
        """The in-flight search's chunks: each group's (src, src_mask), and its (B, P) prefixes
        (-1 past each one's end) where there are prefixes."""
        width = max((len(p) for p in prefixes), default=1) if prefixes is not None else 0
        for group in groups:
            src, mask = self._source_batch([pieces[p] for p in group])
            if prefixes is None:
                yield src, mask
                continue
            starts = torch.full((len(group), width), -1, dtype=torch.long)
            for row, p in enumerate(group):
                starts[row, : len(prefixes[p])] = torch.tensor(prefixes[p], dtype=torch.long)
            yield src, mask, starts.to(self.device)

    def check_prefixes(self, sentences: list[str], prefixes: list[Optional[str]], d: DecodeConfig) -> None:
        """ConfigError where translate would refuse these prefixes (serve checks a request so)."""
        self._prefix_ids([self.source_ids(text) for text in sentences], prefixes, d)

    def _prefix_ids(self, sources: list[list[int]], prefixes: list[Optional[str]], d: DecodeConfig
                    ) -> list[list[int]]:
        """The target ids each sentence's translation must start with ([]: none), checked: one
        prefix a sentence (`sources`: their token ids), only where the in-flight search runs,
        within the length limit."""
        if len(prefixes) != len(sources):
            raise ConfigError(f"prefix: {len(prefixes)} prefixes for {len(sources)} sentences")
        off = [why for why, on in (("plain: true", self.cfg.plain), ("--sample", d.sample > 0),
                                   ("--shortlist", self.shortlist is not None)) if on]
        if off:
            raise ConfigError(f"prefix: not with {off[0]} (the batched search forces prefixes)")
        ids = [self.target_ids(p) if p else [] for p in prefixes]
        for k, (source, forced) in enumerate(zip(sources, ids)):
            first = min(len(source), d.max_source_len)
            if forced and not first:
                raise ConfigError(f"prefix of sentence {k + 1}: the sentence is empty: nothing to translate")
            limit = int(torch.tensor(float(first)) * d.max_len_ratio) + 10  # the search's, in fp32
            if len(forced) > limit:
                raise ConfigError(f"prefix of sentence {k + 1}: {len(forced)} pieces, but its translation "
                                  f"may have at most {limit} before </s> (decode.max_len_ratio)")
        return ids

    def check_constraints(self, sentences: list[str], constraints: list[Optional[list[str]]],
                          d: DecodeConfig) -> None:
        """ConfigError where translate would refuse these constraints (serve checks a request so)."""
        self._constraint_ids([self.source_ids(text) for text in sentences], constraints, d)

    def _constraint_ids(self, sources: list[list[int]], constraints: list[Optional[list[str]]],
                        d: DecodeConfig, prefixes: Optional[list] = None) -> list[list[list[int]]]:
        """Each sentence's phrases as target ids, checked: one list a sentence, no empty phrase,
        only where the constrained search runs, within the sentence's length limit."""
        if len(constraints) != len(sources):
            raise ConfigError(f"constraints: {len(constraints)} lists for {len(sources)} sentences")
        off = [why for why, on in (("plain: true", self.cfg.plain), ("--sample", d.sample > 0),
                                   ("--shortlist", self.shortlist is not None),
                                   ("--prefix", prefixes is not None)) if on]
        if off:
            raise ConfigError(f"constraints: not with {off[0]} (engine/decode/constraints.py's search)")
        out = []
        for k, (source, phrases) in enumerate(zip(sources, constraints)):
            ids = [self.target_ids(p) for p in phrases or []]
            empty = next((n for n, p in enumerate(ids) if not p), None)
            if empty is not None:
                raise ConfigError(f"constraints of sentence {k + 1}: phrase {empty + 1} is empty")
            if ids and len(self._split(source, d.max_source_len)) > 1:
                raise ConfigError(f"constraints of sentence {k + 1}: the sentence is longer than "
                                  f"decode.max_source_len ({d.max_source_len}) and is translated in "
                                  "pieces; constraints hold for one search: raise max_source_len")
            if ids and not source:
                raise ConfigError(f"constraints of sentence {k + 1}: the sentence is empty: nothing to "
                                  "translate")
            limit = int(torch.tensor(float(len(source))) * d.max_len_ratio) + 10  # the search's, in fp32
            total = sum(len(p) for p in ids)
            if total > limit:
                raise ConfigError(f"constraints of sentence {k + 1}: {total} pieces, but its translation may "
                                  f"have at most {limit} before </s> (decode.max_len_ratio)")
            out.append(ids)
        return out

    def _sample(self, pieces: list[list[int]], options: SearchOptions) -> list:
        """``decode.sample`` translations drawn for each source piece, batched by length, the draws
        from one generator seeded with ``decode.seed``."""
        d = options.decode
        generator = torch.Generator(device=self.device).manual_seed(d.seed)
        hyps: list = [None] * len(pieces)
        for group in iterate_sorted(pieces, d.batch_size):
            src, mask = self._source_batch([pieces[p] for p in group])
            drawn = sample(self.model, src, mask, d, generator, options.with_attention)
            for p, samples in zip(group, drawn):
                hyps[p] = samples
        return hyps

    def _result(self, pieces: list[list[int]], hyps: list, attention: bool) -> Translation:
        """One Translation from the hypotheses of a sentence's consecutive source pieces."""
        rev = self.cfg.data.reverse_source
        src_ids = [t for piece in pieces for t in piece]
        tokens = [t for h in hyps for t in h.tokens]
        n_tgt = sum(len(h.tokens) for h in hyps)
        score = sum(h.score * (len(h.tokens) + 1) for h in hyps) / (n_tgt + len(hyps))
        weights = None
        if attention and all(h.attention is not None for h in hyps) and attention_kept(n_tgt, len(src_ids)):
            weights, before = [], 0
            for piece, h in zip(pieces, hyps):
                after = len(src_ids) - before - len(piece)
                rows = h.attention if h is hyps[-1] else h.attention[:-1]  # one </s> row, the last
                rows = [row[::-1] if rev else row for row in rows]  # columns in reading order
                weights += [[0.0] * before + list(r) + [0.0] * after for r in rows]
                before += len(piece)
        return Translation(self.tgt_tok.decode(tokens), self.tgt_tok.pieces(tokens), score,
                           self.src_tok.pieces(src_ids), weights)

    def score(self, sources: Iterable[str], targets: Iterable[str], options: Optional[DecodeConfig] = None, *,
              per_token: bool = False, attention: bool = False, batch_size: int = 64,
              **overrides: Any) -> list[Score]:
        """log p(target | source) of each pair under the model, by teacher forcing (forced
        decoding, engine/decode/scoring.py): the sum over the target's pieces and </s>, the mean
        per token, and ``normalised``, the sum over tokens**alpha as the search ranks hypotheses
        (``alpha`` and ``precision`` as translate's options), so a beam's own output scores its
        beam score. `per_token`: each token's log-probability too; `attention`: the rows."""
        sources, targets = list(sources), list(targets)
        if len(sources) != len(targets):
            raise ConfigError(f"score: {len(sources)} sources but {len(targets)} targets")
        d = self.options(options, **overrides)
        pairs = [(self.source_ids(s), self.target_ids(t)) for s, t in zip(sources, targets)]
        precision = self.precision.resolve(d.precision)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            # the attention rows also where the coverage penalty reads them
            raw = self._score_pairs(pairs, batch_size, per_token, attention or d.coverage > 0)
        return [Score(s, t, lp, len(tgt) + 1, ranked_score(lp, len(tgt) + 1, rows, d),
                      self.tgt_tok.pieces(tgt) + ["</s>"], token_lps, rows if attention else None)
                for s, t, (_, tgt), (lp, token_lps, rows) in zip(sources, targets, pairs, raw)]

    def _score_pairs(self, pairs: list[tuple[list[int], list[int]]], batch_size: int, per_token: bool,
                     attention: bool) -> list[tuple[float, Optional[list[float]], Optional[list]]]:
        """scoring.py's ``score_pairs`` on (source ids, target ids) pairs with this model."""
        rev = self.cfg.data.reverse_source
        return score_pairs(self.model, pairs, batch_size, per_token, attention, rev)

    def force(self, sources: list[str], targets: list[str], batch_size: int = 64,
              links: str = "attention") -> list[Optional[list[list[float]]]]:
        """Attention under teacher forcing on given translations (for alignment scoring).

        Returns per pair the weights, one row per target token plus </s>, columns in the
        source's reading order (also with reverse_source); None for RNNencdec. `links` (as
        decode.links; None: the model's default): "head", the alignment head's β rows instead
        (model.alignment_head; its </s> row is zero); "saliency", rows of gradient × input
        saliency (engine/align/saliency.py); "mean", the mean of those and the attention's (the
        head's where the model has one), cell by cell.
        """
        pairs = [(self.source_ids(s), self.target_ids(t)) for s, t in zip(sources, targets, strict=True)]
        return self._forced(pairs, batch_size, self.options(links=links).links)

    @torch.no_grad()
    def _forced(self, pairs: list[tuple[list[int], list[int]]], batch_size: int = 64,
                links: Optional[str] = "attention") -> list[Optional[list[list[float]]]]:
        """force() on (source ids in reading order, target ids) pairs."""
        from rnnsearch.engine.data.parallel import Example, collate

        links = self.link_rows(links)
        self.check_links(links)
        # saliency rows stand beside attention rows: RNNencdec has none (nor saliency, then)
        saliency = links in ("saliency", "mean") and self.cfg.model.arch == "rnnsearch"
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
            attn = saliency_rows(self.model, batch) if saliency else None
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


def write_attention_jsonl(path: str | Path, translations: list[Translation]) -> None:
    from rnnsearch.io import atomic_write_text

    lines = [json.dumps(t.attention_json(), ensure_ascii=False) for t in translations]
    atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))
