"""Ensembles: several models translating as one (``--model A --model B``, or ``--model A,B``).

Each model reads the source as it was trained to, through its own tokeniser (and its own
data.reverse_source), keeps its own encoding and its own decoder state, and at every step the
next word's distribution is the mean of the models' (Hansen & Salamon 1990; the NMT ensembles of
Sutskever et al. 2014 and Jean et al. 2015):

    p(y_i | y_<i, x) = 1/M Σ_k p_k(y_i | y_<i, x)       log p = logsumexp_k log p_k − log M

The arithmetic mean of the probabilities, not of the log-probabilities (Marian's weighted sum):
the mixture is itself a distribution, so an ensemble's scores are log-probabilities that
`rnnsearch score` reproduces, its length normalisation means what a single model's does, and one
model that is sure of a word cannot be vetoed by another's small probability, which a geometric
mean lets a single model do (fairseq and OpenNMT-py average so too). Words are chosen by id, so
the models must share the target vocabulary: the same pieces under the same ids (:func:`ensemble`
refuses others). The search is the in-flight search of engine/accel/inflight.py, unchanged: the
ensemble is a model to it, whose encoding (:class:`Joint`) holds every model's, and whose state
is the models' states side by side.

The attention of the ensemble's translations is the mean of the models' where they all read a
sentence in the same pieces in the same order, else the first model's.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Optional, cast

import torch
import torch.nn.functional as F

from rnnsearch.config import ConfigError
from rnnsearch.engine.accel import speedup as fast
from rnnsearch.engine.accel.inflight import cat_encoded
from rnnsearch.engine.data.parallel import pad
from rnnsearch.engine.data.vocab import PAD
from rnnsearch.engine.decode.scoring import score_pairs
from rnnsearch.engine.decode.translator import Translator
from rnnsearch.nn.model import Encoded


@dataclass
class Joint(Encoded):
    """Every model's encoding of a batch of sentences: ``members``, one Encoded each. Its own
    src_mask is the first model's (the length limit and the attention columns are read from it);
    its state, the models' s_0 side by side; ``alike`` (B,), True where every model reads the
    sentence as the first does."""

    members: tuple[Encoded, ...] = ()
    alike: torch.Tensor = field(default_factory=lambda: torch.ones(0, dtype=torch.bool))

    @classmethod
    def of(cls, members: list[Encoded], alike: torch.Tensor) -> Joint:
        first = members[0]
        return cls(None, None, None, first.src_mask, torch.cat([m.state for m in members], 1),
                   tuple(members), alike)

    def index_select(self, index: torch.Tensor) -> Joint:
        return Joint.of([m.index_select(index) for m in self.members], self.alike.index_select(0, index))

    def cat(self, other: Joint) -> Joint:
        """Rows of self, then rows of `other` (inflight.py's ``cat_encoded``)."""
        return Joint.of([cat_encoded(a, b) for a, b in zip(self.members, other.members)],
                        torch.cat([self.alike, other.alike]))


class Ensemble:
    """M models decoding as one, for the in-flight search: :meth:`encode` takes each model's own
    source ids, :meth:`search_step` is engine/accel/speedup.py's ``step`` for all of them at once."""

    align_head = None  # the alignment head's rows are one model's: an ensemble links by attention

    def __init__(self, models: list):
        self.models = models
        self.sizes = [m.cfg.hidden for m in models]  # each one's share of the joint state

    def eval(self) -> Ensemble:
        for m in self.models:
            m.eval()
        return self

    def num_parameters(self) -> int:
        return sum(m.num_parameters() for m in self.models)

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        return itertools.chain.from_iterable(m.parameters() for m in self.models)

    def buffers(self) -> Iterator[torch.Tensor]:
        return itertools.chain.from_iterable(m.buffers() for m in self.models)

    def encode(self, srcs: list[torch.Tensor], masks: list[torch.Tensor]) -> Joint:
        """Each model's encoding of its own ids (B, S_k) of the same B sentences."""
        members = [m.encode(src, mask) for m, src, mask in zip(self.models, srcs, masks)]
        first = srcs[0]
        alike = torch.ones(first.size(0), dtype=torch.bool, device=first.device)
        for src in srcs[1:]:
            width = max(src.size(1), first.size(1))
            alike &= (_widen(src, width) == _widen(first, width)).all(1)
        return Joint.of(members, alike)

    def search_step(self, enc: Joint, state: torch.Tensor, y_prev: torch.Tensor,
                    rows: Optional[torch.Tensor] = None, output=None):
        """speedup.py's ``step`` of the ensemble: log of the mean of the models' p(y_i), the
        models' new states side by side, the attention (the models' mean where they read the
        sentence alike, else the first's)."""
        if output is not None:
            raise ConfigError("an ensemble decodes over the whole target vocabulary (no --shortlist)")
        steps = [fast.step(m, e, s, y_prev, rows=rows)
                 for m, e, s in zip(self.models, enc.members, state.split(self.sizes, 1))]
        new_state = torch.cat([s for _, s, _ in steps], 1)
        return mixture([lp for lp, _, _ in steps]), new_state, _mean_attention(enc, [a for _, _, a in steps],
                                                                              state.size(0))


def mixture(log_ps: list[torch.Tensor]) -> torch.Tensor:
    """log of the mean of the distributions exp(log_ps[k]), each (rows, V): summed as
    probabilities, in place, each at most 1 (no overflow; torch.logsumexp over the stacked
    tensors took 7× as long on a CPU, most of an ensemble's beam step). A word that every model
    gives less than fp32's smallest normal number (log p < −87.3) gets −87.3."""
    total = log_ps[0].float().exp()
    term = torch.empty_like(total)
    for log_p in log_ps[1:]:
        total.add_(torch.exp(log_p.float(), out=term))
    return total.div_(len(log_ps)).clamp_(min=torch.finfo(total.dtype).tiny).log_()


def _widen(ids: torch.Tensor, width: int) -> torch.Tensor:
    return ids if ids.size(1) == width else F.pad(ids, (0, width - ids.size(1)), value=PAD)


def _mean_attention(enc: Joint, rows: list[Optional[torch.Tensor]], n_rows: int) -> Optional[torch.Tensor]:
    """Per row, the models' mean attention where they read its sentence alike, else the first's."""
    first, alike = rows[0], enc.alike
    present = [a for a in rows if a is not None]
    if first is None or len(present) < len(rows) or not bool(alike.any()):
        return first
    width = first.size(1)  # alike rows have the same real columns in every model; the rest are 0
    cut = [a[:, :width] if a.size(1) >= width else F.pad(a, (0, width - a.size(1))) for a in present]
    mean = torch.stack([a.float() for a in cut]).mean(0).to(first.dtype)
    return torch.where(alike.repeat_interleave(n_rows // alike.size(0)).unsqueeze(1), mean, first)


class Piece(list):
    """A source (or a piece of one) as the first model's ids, with every model's ids of the same
    text in ``members`` (the first's among them)."""

    members: tuple[list[int], ...] = ()


class EnsembleTranslator(Translator):
    """Translator over several models (:func:`ensemble`): translate, translate_n_best and score
    as a single model's, with the first model's tokenisers, configuration and decoding defaults."""

    def __init__(self, members: list[Translator]):  # not super().__init__: that sets up one model
        first = members[0]
        self.members = members
        self.cfg, self.src_tok, self.tgt_tok = first.cfg, first.src_tok, first.tgt_tok
        self.device = first.device
        self.model = Ensemble([m.model for m in members])
        self.parameters = sum(m.parameters for m in members)
        self.model_dir, self.model_dirs = first.model_dir, [m.model_dir for m in members]
        self.quantized, self.graphs, self.shortlist = first.quantized, None, None
        self.precision = first.precision

    def check_links(self, links: Optional[str], name=str) -> None:
        if links not in (None, "attention"):
            raise ConfigError(f"{name('links')}: an ensemble links by its attention (not {links})")

    def source_ids(self, text: str) -> Piece:
        """The first model's ids of `text`, every model's in ``members``."""
        return _piece([m.source_ids(text) for m in self.members])

    def _split(self, ids: list[int], limit: int) -> list[list[int]]:
        """A long source in consecutive pieces cut after the same whole words in every model's
        ids, each piece as long as every model's ids of it fit `limit` (one word at least)."""
        members = cast(Piece, ids).members  # source_ids made it
        if all(len(m) <= limit for m in members):
            return [ids] if ids else []
        bounds = [_word_starts(m, t.src_tok) + [len(m)] for m, t in zip(members, self.members)]
        words = len(bounds[0]) - 1
        if any(len(b) - 1 != words for b in bounds):  # the models see other words: not cut
            return [ids]
        pieces: list[list[int]] = []
        a = 0
        while a < words:
            b = a + 1
            while b < words and all(bound[b + 1] - bound[a] <= limit for bound in bounds):
                b += 1
            pieces.append(_piece([m[bound[a]:bound[b]] for m, bound in zip(members, bounds)]))
            a = b
        return pieces

    def _source_batch(self, pieces: list[list[int]]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        srcs = []
        for k, member in enumerate(self.members):
            rev = member.cfg.data.reverse_source
            ids = [cast(Piece, p).members[k] for p in pieces]  # source_ids and _split make Pieces
            srcs.append(pad([i[::-1] if rev else i for i in ids]).to(self.device))
        return srcs, [s != PAD for s in srcs]

    def _sample(self, pieces, options):
        raise ConfigError("--sample draws from one model; an ensemble searches (give one --model)")

    def _score_pairs(self, pairs, batch_size, per_token, attention):
        """Translator._score_pairs under the ensemble: each model scores the pair as it reads the
        source; per token the log of the models' mean probability, the first model's attention."""
        raws = [score_pairs(m.model, [(cast(Piece, src).members[k], tgt) for src, tgt in pairs], batch_size,
                            True, attention and k == 0, m.cfg.data.reverse_source)
                for k, m in enumerate(self.members)]
        out = []
        for i in range(len(pairs)):
            tokens = [r[i][1] for r in raws]
            if any(x is None for x in tokens):  # an empty source: -inf, as a single model scores it
                out.append((float("-inf"), None, None))
                continue
            mixed = torch.logsumexp(torch.tensor(tokens, dtype=torch.float64), 0) - math.log(len(raws))
            lps = mixed.tolist()
            out.append((sum(lps), lps if per_token else None, raws[0][i][2]))
        return out


def _word_starts(ids: list[int], tok) -> list[int]:
    """The positions in `ids` where a word starts (a piece with "▁", or every id of a word
    vocabulary)."""
    pieces = tok.pieces(ids)
    if not any(p.startswith("▁") for p in pieces):
        return list(range(len(ids)))
    return [k for k, p in enumerate(pieces) if k == 0 or p.startswith("▁")]


def _piece(members: list[list[int]]) -> Piece:
    piece = Piece(members[0])
    piece.members = tuple(members)
    return piece


def ensemble(members: list[Translator]) -> EnsembleTranslator:
    """The models of `members` as one translator; a ConfigError where they cannot be: another
    target vocabulary, or a speed path that decodes one model (--plain, --shortlist, --cuda-graphs)."""
    first = members[0]
    vocab = _entries(first)
    for m in members[1:]:
        theirs = _entries(m)
        if theirs != vocab:
            at = next((k for k, (a, b) in enumerate(zip(vocab, theirs)) if a != b),
                      min(len(vocab), len(theirs)))
            differ = (f"; id {at} is {vocab[at]!r} in one, {theirs[at]!r} in the other"
                      if at < min(len(vocab), len(theirs)) else "")
            raise ConfigError(f"ensemble: {m.model_dir} has another target vocabulary than {first.model_dir} "
                              f"({len(theirs):,} and {len(vocab):,} entries{differ}): an ensemble averages "
                              "the probabilities of the same words")
    for m in members:
        off = [why for why, on in (("plain: true (--plain)", m.cfg.plain), ("--shortlist", m.shortlist),
                                   ("--cuda-graphs", m.graphs)) if on]
        if off:
            raise ConfigError(f"ensemble: not with {off[0]} (an ensemble decodes through the batched "
                              "search over the whole vocabulary)")
    return EnsembleTranslator(members)


def _entries(m: Translator) -> list[str]:
    """The target vocabulary's entries by id (the special ids, which pieces() leaves out, as "")."""
    return ["".join(m.tgt_tok.pieces([i])) for i in range(len(m.tgt_tok))]
