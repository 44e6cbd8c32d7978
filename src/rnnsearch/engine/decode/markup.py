"""Inline markup carried across a translation.

A line such as ``the <b>red</b> house`` goes through three steps:

1. `parse` strips the markup: the model reads `Marked.text`, and each `Tag` remembers the source
   words it enclosed.
2. The plain text is translated, with word alignment links (i, j): source word i of
   ``text.split()``, target word j of ``translation.split()``, both 0-based (engine/align/links.py).
3. `transfer` puts each tag back around the target words aligned to its source words.

`translate_markup` drives the three over lines; `placed_spans` is step 3's spans alone.

Reading markup (`parse`)
    Markup is start tags ``<name ...>``, end tags ``</name ...>`` and comments ``<!--...-->``,
    read as HTML reads them: a name starts with an ASCII letter; an attribute value may be quoted
    (and then hold ``>``) or not; ``<x/>`` closes itself, but not ``<x a=b/>`` (the value is
    ``b/``). Any other ``<`` is text: ``a < b``, ``<a href="x>`` (its quote never closed). Each
    tag is kept byte for byte as written: attributes, quoting, case.

    Text has its entities decoded (``&amp;``, ``&lt;``, ``&#233;``, ``&eacute;``: html.unescape),
    control characters made spaces and invisible format characters dropped (as engine/data/parallel.py's
    `normalize`), and whitespace collapsed to single spaces: the text the model reads.

    An end tag closes the latest open start tag of its name (case-insensitively), even when tags
    opened after that one are still open: those stay open, and overlap it (see Nesting).

    A point encloses no word: ``<x/>``, a comment, a start tag of an HTML void element (``<br>``,
    ``<img ...>``) that no end tag closes (``<br>x</br>`` is a pair), a pair around no word
    (``<b></b>``, ``<b> </b>``). It stands before the word that follows it (before the word it
    sits in).

    Repairs, so that every output is well-formed without losing a tag:
    * an unclosed ``<b>`` is closed at the end of the line by a made-up ``</b>`` (its name as
      written), `Tag.repaired` ``"closed"``;
    * a stray ``</i>`` is opened at the start of the line by a made-up ``<i>``, repaired
      ``"opened"``; a stray end tag of a void element, ``</br>``, gets its ``<br>`` just before
      it: an empty pair.

    Words are whole: a tag encloses every word it touches, so ``un<b>believ</b>able`` encloses
    ``unbelievable``.

    Nesting: the tags form a tree of word spans, any two disjoint or one inside the other. Where
    two spans cross (overlapping tags, ``<b>a <i>b</b> c</i>``, or tags snapped to a shared
    word), the later tag is cut at the earlier one's edge, to the part with more words, the part
    outside on a tie: ``<b>a b</b> <i>c</i>``. Two tags around the same words nest, the earlier
    outside.

Placing tags (`transfer`)
    A pair wraps the smallest contiguous run of target words that holds every target word aligned
    to any of its source words: from the first such word to the last.

    A point, and a pair none of whose words is aligned, becomes a point in the target: before the
    first target word aligned to the first aligned source word at or after it; failing that, after
    the last target word aligned to the last aligned source word before it; with no links at
    all, at the start if it stood at the start of the source, else at the end. An unaligned pair
    is thus written empty (``<b></b>``), never dropped.

    Nesting is kept: a tag is cut back to its parent's target span (a point outside it moves to
    its nearer end). Where two tags' target spans cross, the one earlier in the source keeps its
    span and the later is cut at its edge, to the part holding more of its aligned target words
    (the part outside on a tie), then narrowed to the aligned words it still holds. A point at
    the edge of a pair's span is inside the pair only if it was in the source; points at one
    position keep their source order.

    Output: every tag exactly once, as written (plus the made-up repairs, once each), so it is
    always well-formed; target words escaped (``&`` ``<`` ``>``) and joined by single spaces. The
    output's text (tags removed, entities decoded) is the translation's words, one space apart.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Optional

Link = tuple[int, int]
Span = tuple[int, int]  # words [first, last); first == last: a point before word `first`

VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
                  "source", "track", "wbr"})

# A comment, or a tag read as HTML reads it: "<", "/"?, a name, attributes (a name, or name=value
# with the value quoted, where ">" may appear, or unquoted), "/"? (self-closing), ">". The
# lookaheads end each name and unquoted value where it must, so that a failed match cannot retry
# every way of splitting them.
_NAME = r"[^\s/>=]+(?![^\s/>=])"
_VALUE = r"""(?:"[^"]*"|'[^']*'|(?!["'])[^\s>]*(?![^\s>]))"""
_TOKEN = re.compile(rf"<!--.*?-->|<(/?)([A-Za-z][^\s/>]*)(?=[\s/>])"
                    rf"((?:\s*(?:{_NAME}(?:\s*=\s*{_VALUE})?|/(?!>)))*)\s*(/?)>", re.S)
_KEEP_FORMAT = {"\u200c", "\u200d"}  # as engine/data/parallel.py: zero-width (non-)joiners carry meaning


@dataclass(frozen=True)
class Tag:
    """One tag, or pair of tags, of a line, and the source words it encloses."""

    start: str  # the start tag as written ('<a href="x">', '<br/>', '<!-- c -->'); made up if repaired
    end: str  # the end tag as written; "" for a void tag or comment; made up if repaired
    first: int  # source words [first, last) of Marked.text; first == last: a point before `first`
    last: int
    parent: Optional[int] = None  # index in Marked.tags of the innermost tag around this one
    repaired: str = ""  # "opened": `start` made up for a stray end tag; "closed": `end` made up


@dataclass(frozen=True)
class Marked:
    """A line with its markup taken out: the plain text and the tags, in the order their start
    tags are written (a parent before its children)."""

    text: str
    tags: tuple[Tag, ...]


@dataclass
class _Raw:
    """A tag while parsing: token positions order tags, character offsets place them."""

    start: str
    end: str
    open_at: float  # token index of the start tag (made-up tags get positions outside 0..n-1)
    close_at: float
    open_char: int
    close_char: int
    repaired: str = ""


def _clean(text: str) -> str:
    if text.isprintable():
        return text
    cats = ((ch, unicodedata.category(ch)) for ch in text)
    return "".join(" " if cat == "Cc" else ch for ch, cat in cats if cat != "Cf" or ch in _KEEP_FORMAT)


def _name(match: re.Match) -> str:
    return match.group(2).lower()


def _scan(markup: str) -> tuple[str, list[_Raw]]:
    """Text (entities decoded, not yet collapsed) and the tags, paired and repaired."""
    parts: list[str] = []
    tags: list[_Raw] = []
    stack: list[tuple[re.Match, int, int]] = []
    matches = list(_TOKEN.finditer(markup, 0, markup.rfind(">") + 1))  # no tag after the last ">"
    pos = at = 0
    for k, m in enumerate(matches):
        parts.append(_clean(html.unescape(markup[pos:m.start()])))
        pos, raw, at = m.end(), m.group(0), at + len(parts[-1])
        if m.group(2) is None or (not m.group(1) and m.group(4)):  # comment, <x/>
            tags.append(_Raw(raw, "", k, k, at, at))
        elif not m.group(1):
            stack.append((m, k, at))
        else:
            tags.append(_close(m, k, at, stack))
    parts.append(_clean(html.unescape(markup[pos:])))
    text, n = "".join(parts), len(matches)
    for m, k, at in stack:  # never closed: a void element is a point, any other closed at the end
        if _name(m) in VOID:
            tags.append(_Raw(m.group(0), "", k, k, at, at))
        else:  # the later opened, the earlier closed
            tags.append(_Raw(m.group(0), f"</{m.group(2)}>", k, 2 * n - k, at, len(text), "closed"))
    return text, tags


def _close(end: re.Match, k: int, at: int, stack: list[tuple[re.Match, int, int]]) -> _Raw:
    """The pair an end tag (token k, character `at`) closes: with the latest open start tag of its
    name, taken off `stack`, or with a made-up one (the module's doc, Repairs)."""
    for depth in range(len(stack) - 1, -1, -1):
        start, k0, at0 = stack[depth]
        if _name(start) == _name(end):
            del stack[depth]
            return _Raw(start.group(0), end.group(0), k0, k, at0, at)
    made_up = f"<{end.group(2)}>"
    if _name(end) in VOID:  # </br>: an empty pair where it stands
        return _Raw(made_up, end.group(0), k - 0.5, k, at, at, "opened")
    return _Raw(made_up, end.group(0), -1 - k, k, 0, at, "opened")  # the later closed, the earlier opened


def _word_spans(text: str, tags: Sequence[_Raw]) -> list[Span]:
    """Character ranges to the words they touch; a range touching none is a point before the
    word that follows it (or that it sits in)."""
    bounds = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    spans = []
    for t in tags:
        touched = [w for w, (a, b) in enumerate(bounds)
                   if t.open_char < t.close_char and a < t.close_char and b > t.open_char]
        if touched:
            spans.append((touched[0], touched[-1] + 1))
        else:
            at = sum(b <= t.open_char for _, b in bounds)
            spans.append((at, at))
    return spans


def parse(markup: str) -> Marked:
    """Plain text and tags of one line of markup; never raises (the policy is the module's doc)."""
    text, raws = _scan(markup)
    raws.sort(key=lambda t: t.open_at)
    parents: list[Optional[int]] = []
    for i, t in enumerate(raws):  # the innermost tag around t in the written order
        around = [j for j in range(i) if raws[j].close_at > t.close_at]
        parents.append(around[-1] if around else None)
    spans, tree = _nest(_word_spans(text, raws), parents)
    order = _preorder(spans, tree)
    index: dict[Optional[int], Optional[int]] = {old: new for new, old in enumerate(order)}
    index[None] = None
    tags = tuple(Tag(raws[i].start, raws[i].end, *spans[i], parent=index[tree[i]], repaired=raws[i].repaired)
                 for i in order)
    return Marked(" ".join(text.split()), tags)


def _ancestors(parents: Sequence[Optional[int]], i: int) -> set[int]:
    out = set()
    p = parents[i]
    while p is not None:
        out.add(p)
        p = parents[p]
    return out


def _weight(a: int, b: int, own: Optional[Collection[int]]) -> int:
    return b - a if own is None else sum(a <= j < b for j in own)


def _uncross(span: Span, others: Iterable[Span], own: Optional[Collection[int]]) -> Span:
    """Cut `span` until it crosses none of `others` (which cross each other nowhere), keeping the
    part with more of its `own` words (all its words if None), the outside part on a tie, then
    tightened around the own words it keeps."""
    s, e = span
    others = list(others)
    crossed = True
    while crossed:
        crossed = False
        for a, b in others:
            if s < a < e < b:  # the part before `a`, or the part inside
                s, e = (s, a) if _weight(s, a, own) >= _weight(a, e, own) else (a, e)
            elif a < s < b < e:  # the part after `b`, or the part inside
                s, e = (b, e) if _weight(b, e, own) >= _weight(s, b, own) else (s, b)
            else:
                continue
            kept = [j for j in own or () if s <= j < e]
            s, e = (min(kept), max(kept) + 1) if kept else (s, e)
            crossed = True
    return s, e


def _nest(spans: Sequence[Span], parents: Sequence[Optional[int]],
          own: Optional[Sequence[Collection[int]]] = None) -> tuple[list[Span], list[Optional[int]]]:
    """Spans cut into a tree (any two disjoint or nested), each inside its parent, and the tree.

    `parents[i] < i`: earlier tags keep their spans, later ones are cut (`_uncross`); `own[i]`:
    the words tag i really covers (its aligned target words), by default all of its span.
    """
    placed: list[Span] = []
    for i, (s, e) in enumerate(spans):
        p = parents[i]
        if p is not None:
            a, b = placed[p]
            if max(s, a) < min(e, b):
                s, e = max(s, a), min(e, b)
            else:  # nothing of it inside its parent: a point at the parent's nearer end
                s = e = min(max(s, a), b)
        placed.append(_uncross((s, e), placed, None if own is None else own[i]))
    return placed, _containers(placed, parents)


def _contains(a: Span, b: Span, ancestor: bool, earlier: bool) -> bool:
    """Whether span `a` holds `b`. Equal spans nest the earlier outside; a point at a's edge, or
    two points at one position, only if a's tag was around b's in the source (`ancestor`)."""
    if b[0] < b[1]:
        return a[0] <= b[0] and b[1] <= a[1] and (a != b or ancestor or earlier)
    return a[0] < b[0] < a[1] or (ancestor and a[0] <= b[0] <= a[1])


def _containers(spans: Sequence[Span], parents: Sequence[Optional[int]]) -> list[Optional[int]]:
    """The innermost span around each one: the tree the output is written from."""
    tree: list[Optional[int]] = []
    for i, b in enumerate(spans):
        up = _ancestors(parents, i)
        around = [j for j, a in enumerate(spans) if j != i and _contains(a, b, j in up, j < i)]
        tree.append(min(around, key=lambda j: (spans[j][1] - spans[j][0], -j)) if around else None)
    return tree


def _children(spans: Sequence[Span], tree: Sequence[Optional[int]]) -> dict[Optional[int], list[int]]:
    """Each tag's children in writing order: by start, a point before a pair starting there."""
    kids: dict[Optional[int], list[int]] = {i: [] for i in range(len(spans))}
    kids[None] = []
    for i in sorted(range(len(spans)), key=lambda i: (spans[i][0], spans[i][0] < spans[i][1], i)):
        kids[tree[i]].append(i)
    return kids


def _preorder(spans: Sequence[Span], tree: Sequence[Optional[int]]) -> list[int]:
    kids, order = _children(spans, tree), []
    todo = list(reversed(kids[None]))
    while todo:
        i = todo.pop()
        order.append(i)
        todo += reversed(kids[i])
    return order


def _anchor(at: int, targets: Sequence[Sequence[int]], n_target: int) -> int:
    """The target position of a point before source word `at` (see the module's doc)."""
    for i in range(at, len(targets)):
        if targets[i]:
            return min(targets[i])
    for i in range(min(at, len(targets)) - 1, -1, -1):
        if targets[i]:
            return max(targets[i]) + 1
    return 0 if at == 0 else n_target


def _aligned(marked: Marked, n_target: int, links: Iterable[Link]) -> tuple[list[list[int]], list[list[int]]]:
    """The target words aligned to each tag (to any of its source words), and to each source word."""
    targets: list[list[int]] = [[] for _ in marked.text.split()]
    for i, j in links:  # links outside either sentence are ignored
        if 0 <= i < len(targets) and 0 <= j < n_target:
            targets[i].append(j)
    return [[j for i in range(t.first, t.last) for j in targets[i]] for t in marked.tags], targets


def target_spans(marked: Marked, n_target: int, links: Iterable[Link]) -> list[Span]:
    """Each tag's span of target words [first, last) from the links alone, before nesting."""
    aligned, targets = _aligned(marked, n_target, links)
    spans = []
    for tag, words in zip(marked.tags, aligned):
        at = _anchor(tag.first, targets, n_target)
        spans.append((min(words), max(words) + 1) if words else (at, at))
    return spans


def placed_spans(marked: Marked, n_target: int, links: Iterable[Link]) -> list[Span]:
    """Each tag's span of target words as `transfer` writes it: from the links, then nested."""
    return _place(marked, n_target, list(links))[0]


def _place(marked: Marked, n_target: int, links: list[Link]) -> tuple[list[Span], list[Optional[int]]]:
    own = _aligned(marked, n_target, links)[0]
    return _nest(target_spans(marked, n_target, links), [t.parent for t in marked.tags], own)


def _pieces(tags: Sequence[Tag], spans: Sequence[Span], tree: Sequence[Optional[int]],
            words: Sequence[str]) -> list[tuple[str, str]]:
    """The output as (kind, text): kind "word", "open"/"close" (a pair around words) or "point"."""
    kids, out, cursor = _children(spans, tree), [], 0
    stack: list[tuple[Optional[int], Iterator[int]]] = [(None, iter(kids[None]))]
    while stack:  # depth first, without recursion: tags may nest deeply
        node, rest = stack[-1]
        kid = next(rest, None)
        upto = spans[kid][0] if kid is not None else spans[node][1] if node is not None else len(words)
        out += [("word", w) for w in words[cursor:upto]]
        cursor = max(cursor, upto)
        if kid is not None:
            out.append(("open" if spans[kid][0] < spans[kid][1] else "point", tags[kid].start))
            stack.append((kid, iter(kids[kid])))
            continue
        stack.pop()
        if node is not None and tags[node].end:
            out.append(("close" if spans[node][0] < spans[node][1] else "point", tags[node].end))
    return out


def _join(pieces: Sequence[tuple[str, str]]) -> str:
    """One space between words, after the last end tag between them (``x</b> <i>y``)."""
    out: list[str] = []
    run: list[tuple[str, str]] = []
    seen_word = False
    for kind, text in pieces:
        if kind != "word":
            run.append((kind, text))
            continue
        cut = max((k + 1 for k, (kd, _) in enumerate(run) if kd == "close"), default=0)
        out += [t for _, t in run[:cut]] + [" "] * seen_word + [t for _, t in run[cut:]]
        out.append(html.escape(text, quote=False))
        run, seen_word = [], True
    out += [t for _, t in run]
    return "".join(out)


def transfer(marked: Marked, translation: str, links: Iterable[Link]) -> str:
    """`translation` with `marked`'s tags put back around the words aligned to theirs."""
    words = translation.split()
    spans, tree = _place(marked, len(words), list(links))
    return _join(_pieces(marked.tags, spans, tree, words))


TranslateFn = Callable[[list[str]], Sequence[tuple[str, Iterable[Link]]]]


def translate_markup(lines: Sequence[str], translate_fn: TranslateFn) -> list[str]:
    """Translate lines of markup: `translate_fn(plain_sentences)` gives (translation, links) for
    each, in one call. Lines with no words are not sent: they come back as their tags alone
    ("" for an empty line)."""
    marked = [parse(line) for line in lines]
    todo = [m.text for m in marked if m.text]
    done = list(translate_fn(todo)) if todo else []
    if len(done) != len(todo):
        raise ValueError(f"translate_fn gave {len(done)} translations for {len(todo)} sentences")
    results = iter(done)
    return [transfer(m, *next(results)) if m.text else transfer(m, "", ()) for m in marked]
