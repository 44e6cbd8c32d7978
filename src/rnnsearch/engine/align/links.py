"""Hard alignments from attention, Pharaoh format, and alignment error rate; the links out of
every translation (Translation.alignment, ``translate --alignment``) and ``--replace-unk``.

Pharaoh format: one line per sentence pair, links ``i-j`` with i the source word and
j the target word (0-based); ``i-j-P`` marks a possible (not sure) link.

AER (Och & Ney 2003), over a corpus, with A the predicted links, S the sure and P
the possible gold links (S ⊆ P):

    precision = |A ∩ P| / |A|      recall = |A ∩ S| / |S|
    AER = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|)
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Optional

Links = set[tuple[int, int]]


def parse_pharaoh(line: str, where: str = "alignment") -> tuple[Links, Links]:
    """`"0-0 1-2-P"` -> (sure, possible) with possible ⊇ sure."""
    sure, possible = set(), set()
    for item in line.split():
        parts = item.split("-")
        try:
            i, j = int(parts[0]), int(parts[1])
            if len(parts) == 2:
                sure.add((i, j))
            elif len(parts) == 3 and parts[2] in ("P", "p"):
                pass
            else:
                raise ValueError
        except (ValueError, IndexError):
            raise ValueError(f"{where}: bad link {item!r} (expected i-j or i-j-P)") from None
        possible.add((i, j))
    return sure, possible


def format_pharaoh(links: Iterable[tuple[int, int]], possible: Iterable[tuple[int, int]] = ()) -> str:
    out = [f"{i}-{j}" for i, j in sorted(set(links))]
    out += [f"{i}-{j}-P" for i, j in sorted(set(possible) - set(links))]
    return " ".join(sorted(out, key=lambda s: tuple(int(x) for x in s.split("-")[:2])))


def argmax_links(weights: Sequence[Sequence[float]]) -> Links:
    """One link per target word: the source word with the most attention. weights[j][i]."""
    return {(max(range(len(row)), key=row.__getitem__), j) for j, row in enumerate(weights) if len(row)}


def threshold_links(weights: Sequence[Sequence[float]], threshold: float = 0.3) -> Links:
    """Many-to-many: every source word with weight ≥ threshold, plus each row's argmax."""
    links = argmax_links(weights)
    links |= {(i, j) for j, row in enumerate(weights) for i, w in enumerate(row) if w >= threshold}
    return links


def aer(predicted: Sequence[Links], sure: Sequence[Links], possible: Sequence[Links]) -> dict:
    """Corpus-level AER, precision and recall."""
    a = s = a_s = a_p = 0
    for pred, gs, gp in zip(predicted, sure, possible, strict=True):
        gp = gp | gs
        a += len(pred)
        s += len(gs)
        a_s += len(pred & gs)
        a_p += len(pred & gp)
    return {"aer": 1.0 - (a_s + a_p) / max(a + s, 1), "precision": a_p / max(a, 1),
            "recall": a_s / max(s, 1), "links": a, "sure": s}


def content_word_accuracy(weights_per_pair: Sequence[Sequence[Sequence[float]]], sure: Sequence[Links],
                          roles: Sequence[Sequence[str]]) -> float:
    """Share of content target words whose attention argmax is one of their sure source words."""
    hit = total = 0
    for weights, gs, rs in zip(weights_per_pair, sure, roles, strict=True):
        for j, role in enumerate(rs):
            gold = {i for i, jj in gs if jj == j}
            if role != "content" or not gold:
                continue
            row = weights[j]
            total += 1
            hit += max(range(len(row)), key=row.__getitem__) in gold
    return hit / max(total, 1)


# Scripts written without spaces between words (Chinese, Japanese; CJK punctuation, full-width
# forms): sentencepiece's "▁" marks only the start of a whole clause there, so pieces are the units.
UNSPACED = re.compile("[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")


def word_spans(pieces: Sequence[str]) -> list[list[int]]:
    """Group subword pieces into words: a sentencepiece "▁" starts a new word.

    Word-level tokens (no "▁" anywhere) are their own words. In unsegmented scripts
    (Chinese, Japanese) every piece is its own unit: merging to whitespace words there
    would collapse a sentence into one "word".
    """
    if not any(p.startswith("▁") for p in pieces):
        return [[k] for k in range(len(pieces))]
    spans: list[list[int]] = []
    for k, p in enumerate(pieces):
        unspaced = UNSPACED.search(p) or (k > 0 and UNSPACED.search(pieces[k - 1]))
        if p.startswith("▁") or not spans or p in ("</s>",) or unspaced:
            spans.append([k])
        else:
            spans[-1].append(k)
    return spans


def merge_subwords(weights: Sequence[Sequence[float]], source: Sequence[str], target: Sequence[str],
                   ) -> tuple[list[list[float]], list[str], list[str]]:
    """Word-level attention from subword attention.

    A source word's weight is the *sum* over its pieces (so rows still sum to 1); a
    target word's row is the *mean* of its pieces' rows. Words are the pieces joined
    without "▁".
    """
    src_spans, tgt_spans = word_spans(source), word_spans(target)
    merged = []
    for span in tgt_spans:
        rows = [weights[k] for k in span]
        mean = [sum(r[i] for r in rows) / len(rows) for i in range(len(source))]
        merged.append([sum(mean[i] for i in s) for s in src_spans])

    def join(tokens, spans):
        return ["".join(tokens[k] for k in s).replace("▁", "") or "▁" for s in spans]

    return merged, join(source, src_spans), join(target, tgt_spans)


def read_naacl(path, n_sentences: int) -> tuple[list[Links], list[Links]]:
    """NAACL 2003 gold links (`SENT EN FR S|P`, 1-based, English first) as (sure, possible)
    per sentence, 0-based (source = French index, target = English index: French→English).

    The P lines list only possible-not-sure links; possible is returned as S ∪ P.
    """
    from rnnsearch.io import DataError, read_lines

    sure: list[Links] = [set() for _ in range(n_sentences)]
    possible: list[Links] = [set() for _ in range(n_sentences)]
    for n, line in enumerate(read_lines(path), 1):
        parts = line.split()
        if not parts:
            continue
        try:
            sent, en, fr = int(parts[0]), int(parts[1]), int(parts[2])
            kind = parts[3] if len(parts) > 3 else "S"
        except (ValueError, IndexError):
            raise DataError(f"{path}:{n}: expected 'SENT EN_POS FR_POS S|P'") from None
        if not 1 <= sent <= n_sentences or en < 1 or fr < 1 or kind not in ("S", "P"):
            raise DataError(f"{path}:{n}: link {line.strip()!r} is out of range or of unknown type")
        link = (fr - 1, en - 1)
        possible[sent - 1].add(link)
        if kind == "S":
            sure[sent - 1].add(link)
    return sure, possible


def read_pharaoh_file(path, n_sentences: int) -> tuple[list[Links], list[Links]]:
    from rnnsearch.io import DataError, read_lines

    lines = read_lines(path)
    if len(lines) != n_sentences:
        raise DataError(f"{path}: {len(lines)} lines, expected one per sentence pair ({n_sentences})")
    sure, possible = [], []
    for n, line in enumerate(lines, 1):
        try:
            s, p = parse_pharaoh(line, f"{path}:{n}")
        except ValueError as e:
            raise DataError(str(e)) from None
        sure.append(s)
        possible.append(p)
    return sure, possible


def symmetrize(forward: Links, backward: Links, method: str = "grow-diag-final-and") -> Links:
    """Combine one sentence's links from the two translation directions, both given as
    (source word, target word) of the forward direction (flip the reverse model's own links).

    ``intersection`` keeps the links both directions found (precise), ``union`` every link
    either found (complete). ``grow-diag-final-and`` (Koehn, Och & Marcu 2003) starts from the
    intersection and grows it: a link of the union next to one already kept (diagonals
    included) is added while either of its words has no link yet, until nothing changes; then
    a union link whose words both still have none is added ("final-and").
    """
    both, either = forward & backward, forward | backward
    if method == "intersection":
        return both
    if method == "union":
        return either
    if method != "grow-diag-final-and":
        raise ValueError(f"symmetrisation must be intersection, union or grow-diag-final-and, got {method!r}")
    links = set(both)
    src_linked, tgt_linked = {i for i, _ in links}, {j for _, j in links}

    def add(link: tuple[int, int]) -> None:
        links.add(link)
        src_linked.add(link[0])
        tgt_linked.add(link[1])

    grown = True
    while grown:
        grown = False
        for i, j in sorted(links):
            for di, dj in _NEIGHBOURS:
                new = (i + di, j + dj)
                lonely = new[0] not in src_linked or new[1] not in tgt_linked
                if new in either and new not in links and lonely:
                    add(new)
                    grown = True
    for direction in (forward, backward):  # final-and
        for i, j in sorted(direction - links):
            if i not in src_linked and j not in tgt_linked:
                add((i, j))
    return links


_NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def flip(links: Links) -> Links:
    """The links of the reverse direction's model, (its source, its target), as (target, source)."""
    return {(j, i) for i, j in links}


def word_attention(translator, sources: Sequence[str], targets: Sequence[str],
                   where: str = "<sources>", links: Optional[str] = None) -> list[list[list[float]]]:
    """Teacher-forced attention of `translator` (a loaded model) on each pair, merged to whitespace
    words: one row per target word and a last one for </s>, one column per source word.
    `where` names the file the sources came from, for errors. `links` (as decode.links): "head",
    the alignment head's rows (model.alignment_head) instead of the attention; "saliency",
    gradient × input saliency rows (saliency.py); "mean", the mean of those and the
    attention's (the head's where the model has one); None: the head where the model has one."""
    from rnnsearch.io import DataError

    if translator.cfg.model.arch != "rnnsearch":
        name = translator.model_dir or "the model"
        raise DataError(f"{name}: an RNNencdec model has no attention to align with")
    out = []
    forced = translator.force(list(sources), list(targets), links=links)
    for n, (weights, s, t) in enumerate(zip(forced, sources, targets), 1):
        words, src_words, tgt_words = merge_subwords(weights, *translator.labels(s, t))
        if len(src_words) != len(s.split()) or len(tgt_words) - 1 != len(t.split()):
            raise DataError(f"{where}:{n}: the tokenizer does not keep whitespace words "
                            "(needed for word alignment)")
        out.append(words)
    return out


def mean_weights(runs: Sequence[Sequence[Sequence[Sequence[float]]]]) -> list[list[list[float]]]:
    """Several models' :func:`word_attention` on the same pairs averaged cell by cell, pair by pair:
    an ensemble's weights (word level, so the models may split words into different pieces)."""
    n = len(runs)
    return [[[sum(cells) / n for cells in zip(*rows)] for rows in zip(*pairs)] for pairs in zip(*runs)]


def attention_links(words: Sequence[Sequence[float]], method: str = "argmax", threshold: float = 0.3,
                    shift: int = 0) -> Links:
    """Hard links from one pair's :func:`word_attention`. Row i is α_i, computed from s_{i-1}
    before the decoder read y_i; ``shift=1`` links y_i by α_{i+1} instead (the </s> row makes
    room). ``method``: "argmax" (one source word per target word) or "threshold"."""
    rows = words[shift: len(words) - 1 + shift]
    return argmax_links(rows) if method == "argmax" else threshold_links(rows, threshold)


def soft_links(forward: Sequence[Sequence[float]], backward: Sequence[Sequence[float]],
               method: str = "argmax", threshold: float = 0.3, shift: int = 0,
               back_shift: Optional[int] = None) -> Links:
    """Soft symmetrisation: links from both directions' attention at once, before either is
    made hard. ``forward`` is one pair's :func:`word_attention` of the source→target model,
    ``backward`` that of the target→source model on the same pair (rows: source words).

    Each (source word j, target word i) gets the geometric mean of its two weights,
    g_ij = sqrt(α→_ij · α←_ji): high only where both directions attend. A link is made where
    g_ij is the largest of its row and of its column (the words pick each other), and with
    ``method="threshold"`` also wherever g_ij ≥ ``threshold``. Hard symmetrisation
    (:func:`symmetrize`) intersects links each direction chose alone, so a word's second-best
    source, nearly tied, is lost; here the weight itself is combined. ``shift`` is applied to
    both directions' rows as in :func:`attention_links` (`back_shift`, where given, to the backward's).
    """
    back_shift = shift if back_shift is None else back_shift
    fwd = forward[shift: len(forward) - 1 + shift]  # target word i -> source word j
    bwd = backward[back_shift: len(backward) - 1 + back_shift]  # source word j -> target word i
    n_tgt, n_src = len(fwd), len(bwd)
    if any(len(r) != n_src for r in fwd) or any(len(r) != n_tgt for r in bwd):
        raise ValueError(f"the two directions disagree on the pair: {n_tgt} target words by "
                         f"{[len(r) for r in fwd]} source words, {n_src} source words by "
                         f"{[len(r) for r in bwd]} target words")
    g = [[math.sqrt(max(fwd[i][j], 0.0) * max(bwd[j][i], 0.0)) for j in range(n_src)]
         for i in range(n_tgt)]
    row_best = [max(range(n_src), key=row.__getitem__) for row in g] if n_src else []
    col_best = [max(range(n_tgt), key=lambda i: g[i][j]) for j in range(n_src)]
    links: Links = {(j, i) for i, j in enumerate(row_best) if col_best[j] == i}
    if method == "threshold":
        links |= {(j, i) for i, row in enumerate(g) for j, w in enumerate(row) if w >= threshold}
    return links


# --------------------------------------------------------------------------- links out of translations
#
# `rnnsearch translate --alignment` and Translation.alignment: hard links (or the weights) from the
# attention a translation carries, over the whitespace words of the source line as given and of
# the translation text as output. docs/alignment.md, "Links out of every translation".

# α_i, not α_{i+1}: on the Hansards trial sentences the shifted row aligned far worse
# (docs/alignment.md, "Which row is the link" and the AER tables: argmax AER 0.587 against 0.769)
DEFAULT_SHIFT = 0
UNK_PIECE = "<unk>"  # how both tokenisers name the unknown piece (vocab.SPECIALS)
UNK_SURFACE = "\u2047"  # "⁇": what sentencepiece writes for it, a word of its own


def source_word_of_pieces(source: str, pieces: Sequence[str], pieces_are_words: bool) -> list[int]:
    """For each source piece the model read, the index of its word in ``source.split()`` (the
    line as given, before data.normalize).

    The model reads ``normalize(source)``: control characters become spaces (one given word may
    become two, both mapped to it) and invisible format characters go (a word of nothing else
    has no piece). A word vocabulary's pieces are those normalised words, one each; a
    sentencepiece piece starting with "▁" starts the next one. Should the two counts disagree
    (an exotic NFKC case), indices are clamped into range.
    """
    from rnnsearch.engine.data.parallel import normalize

    given = [k for k, word in enumerate(source.split()) for _ in normalize(word).split()]
    if not given:
        return [-1] * len(pieces)  # nothing to point at
    out, word = [], -1
    for k, p in enumerate(pieces):
        word = k if pieces_are_words else word + (p.startswith("▁") or word < 0)
        out.append(given[min(word, len(given) - 1)])
    return out


def target_word_of_pieces(pieces: Sequence[str], pieces_are_words: bool, n_words: int) -> list[int]:
    """For each target piece, the index of its word in the decoded text's ``text.split()``
    (`n_words` of them); -1 for none.

    Word vocabulary: the text is the pieces joined by spaces. Sentencepiece: the text is the
    pieces with "▁" as a space, an unknown piece written " ⁇ " (a word of its own), a run of
    byte pieces (byte_fallback) as the UTF-8 it spells; a piece is in the word holding its
    first visible character, one without (a bare "▁", a byte inside a character) in the next.
    """
    if pieces_are_words:
        return [k if k < n_words else -1 for k in range(len(pieces))]
    out: list[Optional[int]] = []
    words, in_word = -1, False
    for surface in _surfaces(pieces):
        first = None
        for ch in surface:
            if ch.isspace():
                in_word = False
                continue
            if not in_word:
                words, in_word = words + 1, True
            first = words if first is None else first
        out.append(first)
    following = None  # a piece with no visible character belongs to the next word (else the last)
    for k in range(len(out) - 1, -1, -1):
        out[k] = following = out[k] if out[k] is not None else following
    last = max((w for w in out if w is not None), default=-1)
    return [min(w if w is not None else last, n_words - 1) for w in out]


_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _surfaces(pieces: Sequence[str]) -> list[str]:
    """The text each piece adds to the decoded output; a byte piece adds the characters its byte
    completes (UTF-8, decoded byte by byte; an invalid sequence as U+FFFD)."""
    import codecs

    out = []
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    for k, p in enumerate(pieces):
        byte = _BYTE_PIECE.fullmatch(p)
        if byte:
            end = k + 1 == len(pieces) or not _BYTE_PIECE.fullmatch(pieces[k + 1])
            out.append(decoder.decode(bytes([int(byte.group(1), 16)]), final=end))
        else:
            out.append(f" {UNK_SURFACE} " if p == UNK_PIECE else p.replace("▁", " "))
    return out


def merge_by_index(weights: Sequence[Sequence[float]], src_of: Sequence[int], tgt_of: Sequence[int],
                   n_src: int, n_tgt: int) -> list[list[float]]:
    """Word rows from piece attention: `weights[r][c]` over target pieces (plus rows after them,
    such as </s>, each kept as a row of its own) and source pieces; ``src_of[c]``/``tgt_of[r]``
    are the pieces' word indices (-1: no word). A source word's weight is the sum over its
    pieces, a target word's row the mean of its pieces' rows (as :func:`merge_subwords`)."""
    rows: list[list[list[float]]] = [[] for _ in range(n_tgt)]
    extra = []
    for r, row in enumerate(weights):
        summed = [0.0] * n_src
        for c, w in enumerate(row):
            if 0 <= src_of[c] < n_src:
                summed[src_of[c]] += w
        if r >= len(tgt_of):
            extra.append(summed)
        elif 0 <= tgt_of[r] < n_tgt:
            rows[tgt_of[r]].append(summed)
    merged = [[sum(col) / len(rs) for col in zip(*rs)] if rs else [0.0] * n_src for rs in rows]
    return merged + extra


def translation_rows(weights: Sequence[Sequence[float]], source: str, source_pieces: Sequence[str],
                     target_pieces: Sequence[str], n_target_words: int, pieces_are_words: bool,
                     subwords: bool = False, shift: int = DEFAULT_SHIFT) -> list[list[float]]:
    """One row per target unit, one column per source unit, from a translation's piece attention
    (``len(target_pieces) + 1`` rows, </s> last). Units: the whitespace words of `source` and of
    the output text (`n_target_words` of them), or with `subwords` the pieces. ``shift=1``: a
    unit's row is the next unit's (the </s> row for the last; see :func:`attention_links`); the
    </s> row is not a unit of its own."""
    if shift not in (0, 1):
        raise ValueError(f"shift must be 0 or 1, got {shift!r}")
    if subwords:
        rows = [list(r) for r in weights]
    else:
        src_of = source_word_of_pieces(source, source_pieces, pieces_are_words)
        tgt_of = target_word_of_pieces(target_pieces, pieces_are_words, n_target_words)
        rows = merge_by_index(weights, src_of, tgt_of, len(source.split()), n_target_words)
    return rows[shift: len(rows) - 1 + shift]


def hard_links(rows: Sequence[Sequence[float]]) -> list[tuple[int, int]]:
    """(source, target) pairs, one per target unit with any source: its highest-weight source
    (the first of ties), sorted by source then target as Pharaoh lines are."""
    return sorted(argmax_links(rows))


def format_soft(rows: Sequence[Sequence[float]], digits: int = 3) -> str:
    """Soft links as text: ``j:i=w,i=w ...``, one group per target unit j (every j, in order),
    its source units i with the weight w rounded to `digits` decimals, those rounding to zero
    left out. ``"0:0=0.912,1=0.081 1:2=0.995"``."""
    groups = []
    for j, row in enumerate(rows):
        cells = ",".join(f"{i}={w:.{digits}f}" for i, w in enumerate(row) if round(w, digits) > 0)
        groups.append(f"{j}:{cells}")
    return " ".join(groups)


def read_lexicon(path) -> dict[str, str]:
    """A lexical table, ``source_word<TAB>target_word<TAB>probability`` a line (the lexicon.tsv
    of ``rnnsearch data align``), as {source word: its most probable target word} (the first
    of ties). Blank lines are skipped; anything else malformed is a DataError naming file:line."""
    from rnnsearch.io import DataError, read_lines

    best: dict[str, tuple[float, str]] = {}
    for n, line in enumerate(read_lines(path), 1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            raise DataError(f"{path}:{n}: expected source_word<TAB>target_word<TAB>probability, "
                            f"got {len(fields)} tab-separated field{'s' * (len(fields) != 1)}")
        src, tgt, prob = fields
        for name, word in (("source", src), ("target", tgt)):
            if not word or word != "".join(word.split()):
                raise DataError(f"{path}:{n}: the {name} word {word!r} is empty or holds whitespace")
        try:
            p = float(prob)
        except ValueError:
            raise DataError(f"{path}:{n}: probability {prob!r} is not a number") from None
        if not 0.0 <= p <= 1.0:  # also refuses nan
            raise DataError(f"{path}:{n}: probability {prob} is outside 0..1")
        if src not in best or p > best[src][0]:
            best[src] = (p, tgt)
    return {src: tgt for src, (_, tgt) in best.items()}


def unknown_target_words(target_pieces: Sequence[str], pieces_are_words: bool, n_words: int) -> list[int]:
    """The indices (in ``text.split()``) of the output words that are an unknown piece: "<unk>"
    of a word vocabulary, "⁇" of a sentencepiece model."""
    words = target_word_of_pieces(target_pieces, pieces_are_words, n_words)
    return sorted({w for p, w in zip(target_pieces, words) if p == UNK_PIECE and w >= 0})


def replace_unk(target_words: Sequence[str], unknown: Iterable[int], links: Iterable[tuple[int, int]],
                source_words: Sequence[str], lexicon: Optional[dict[str, str]] = None,
                key: Optional[Callable[[str], str]] = None) -> list[str]:
    """Luong et al. (2015)'s unknown-word replacement: each output word in `unknown` becomes the
    translation of the source word linked to it (`links`, (source, target) word pairs) in
    `lexicon`, or that source word itself where the table lacks it or there is none. The table
    is looked up with the source word as given, then with ``key(word)`` (the word as the model
    reads it) where `key` is given. An unknown word without a link stays."""
    out = list(target_words)
    source_of = {j: i for i, j in sorted(links, reverse=True)}  # several: the first source word
    for j in unknown:
        if j not in source_of or not 0 <= j < len(out):
            continue
        word = source_words[source_of[j]]
        table = lexicon or {}
        found = table.get(word)
        if found is None and key is not None:
            found = table.get(key(word))
        out[j] = word if found is None else found
    return out
