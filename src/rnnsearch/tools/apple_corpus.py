"""The built-in English→Chinese corpus grown from *I ate an apple yesterday*, with gold alignments.

English clauses read ``S V O [PLACE] [TIME]``; Chinese ones ``S [TIME] [PLACE] V 了 O``,
so the time phrase ("yesterday") moves to the middle and the alignment's diagonal
bends. Clauses are joined by "and" ↔ "，"; the sentence ends with "." ↔ "。".

    i ate an apple yesterday .          我 昨天 吃 了 一 个 苹果 。

Every pair carries its gold alignment: *sure* links between words that translate
each other, *possible* links for words with no counterpart (了 to the verb and the
time phrase, measure words to their noun, 的, English "the"/"of"). Every Chinese word
also has a role, so attention can be scored on content words alone (subjects, verbs,
numbers, adjectives, nouns, place and time words) — not on punctuation, 了, 的,
measure words or 在.

Everything is deterministic in the seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# (english, chinese, measure word) — English singular; plural adds -s unless given.
NOUNS = [
    ("apple", "苹果", "个"), ("book", "书", "本"), ("cat", "猫", "只"), ("letter", "信", "封"),
    ("movie", "电影", "部"), ("cup of tea", "茶", "杯"), ("dog", "狗", "只"), ("bird", "鸟", "只"),
    ("car", "车", "辆"), ("pen", "笔", "支"), ("banana", "香蕉", "根"), ("orange", "橙子", "个"),
    ("photo", "照片", "张"), ("table", "桌子", "张"), ("bottle of water", "水", "瓶"),
    ("bowl of noodles", "面条", "碗"), ("flower", "花", "朵"), ("newspaper", "报纸", "份"),
]
ADJECTIVES = [("red", "红"), ("new", "新"), ("big", "大"), ("small", "小"), ("old", "旧"),
              ("black", "黑"), ("white", "白"), ("green", "绿")]
NUMBERS = [("a", "一"), ("two", "两"), ("three", "三"), ("four", "四"), ("five", "五")]
VERBS = [("ate", "吃"), ("drank", "喝"), ("bought", "买"), ("saw", "看见"), ("read", "读"),
         ("wrote", "写"), ("sold", "卖"), ("found", "找到"), ("liked", "喜欢"), ("washed", "洗")]
# Subjects as (english words, chinese words, [(en index, zh index, sure?)], zh roles)
SUBJECTS = [
    (["i"], ["我"]), (["you"], ["你"]), (["he"], ["他"]), (["she"], ["她"]), (["we"], ["我们"]),
    (["they"], ["他们"]), (["my", "friend"], ["我", "的", "朋友"]), (["the", "teacher"], ["老师"]),
    (["his", "friend"], ["他", "的", "朋友"]), (["her", "mother"], ["她", "的", "妈妈"]),
    (["the", "doctor"], ["医生"]), (["my", "teacher"], ["我", "的", "老师"]),
    (["the", "student"], ["学生"]), (["our", "neighbour"], ["我们", "的", "邻居"]),
]
PLACES = [("park", "公园", "in"), ("home", "家", "at"), ("school", "学校", "at"),
          ("library", "图书馆", "in"), ("station", "车站", "at"), ("shop", "商店", "in"),
          ("garden", "花园", "in"), ("office", "办公室", "in")]
# Time phrases compose: yesterday [part of day]; this [part of day] (今天); this/last week/month.
DAY_PARTS = [("morning", "早上"), ("afternoon", "下午"), ("evening", "晚上")]
PERIODS = [("week", "星期"), ("month", "月")]

VOWEL_SOUND = tuple("aeiou")
IRREGULAR_PLURAL = {"cup of tea": "cups of tea", "bottle of water": "bottles of water",
                    "bowl of noodles": "bowls of noodles"}

CONTENT = "content"
FUNCTION = "function"
PUNCT = "punct"


@dataclass
class Pair:
    """One sentence pair with its gold alignment.

    sure / possible: sets of (source index, target index); possible ⊇ sure.
    roles: one of content | function | punct per target word.
    """

    src: list[str] = field(default_factory=list)
    tgt: list[str] = field(default_factory=list)
    sure: set[tuple[int, int]] = field(default_factory=set)
    possible: set[tuple[int, int]] = field(default_factory=set)
    roles: list[str] = field(default_factory=list)

    def pharaoh(self) -> str:
        """Gold links as `i-j` (sure) and `i-j-P` (possible only), source index first, sorted."""
        links = [f"{i}-{j}" for i, j in sorted(self.sure)]
        links += [f"{i}-{j}-P" for i, j in sorted(self.possible - self.sure)]
        return " ".join(sorted(links, key=lambda s: tuple(int(x) for x in s.split("-")[:2])))


class _Builder:
    """Appends aligned phrases to a Pair, keeping indices straight."""

    def __init__(self) -> None:
        self.pair = Pair()

    def src(self, *words: str) -> list[int]:
        start = len(self.pair.src)
        self.pair.src.extend(words)
        return list(range(start, len(self.pair.src)))

    def tgt(self, word: str, role: str) -> int:
        self.pair.tgt.append(word)
        self.pair.roles.append(role)
        return len(self.pair.tgt) - 1

    def link(self, i: int, j: int, sure: bool = True) -> None:
        self.pair.possible.add((i, j))
        if sure:
            self.pair.sure.add((i, j))


@dataclass
class Clause:
    subject: tuple
    verb: tuple
    number: tuple
    adjective: tuple | None
    noun: tuple
    place: tuple | None
    time: tuple | None  # (kind, first, second) see _time_words


def _time_words(time: tuple) -> tuple[list[str], list[tuple[str, str, list[int]]]]:
    """English words and the Chinese (word, role) sequence of a time phrase, with links.

    Returns (english, chinese) where chinese items are (word, "content"|"function", src offsets...).
    """
    kind = time[0]
    if kind == "yesterday":
        part = time[1]
        en = ["yesterday"] + ([part[0]] if part else [])
        zh = [("昨天", CONTENT, [0])] + ([(part[1], CONTENT, [1])] if part else [])
    elif kind == "this_day":  # this morning -> 今天 早上
        en = ["this", time[1][0]]
        zh = [("今天", CONTENT, [0]), (time[1][1], CONTENT, [1])]
    else:  # this/last week/month -> 这/上 个 星期/月
        word, zh_word = ("this", "这") if kind == "this_period" else ("last", "上")
        en = [word, time[1][0]]
        zh = [(zh_word, CONTENT, [0]), ("个", FUNCTION, []), (time[1][1], CONTENT, [1])]
    return en, zh


def random_clause(rng: random.Random) -> Clause:
    subject = rng.choice(SUBJECTS)
    verb = rng.choice(VERBS)
    number = rng.choice(NUMBERS)
    noun = rng.choice(NOUNS)
    adjective = rng.choice(ADJECTIVES) if rng.random() < 0.4 and " of " not in noun[0] else None
    place = rng.choice(PLACES) if rng.random() < 0.5 else None
    time = None
    if rng.random() < 0.6:
        kind = rng.choice(["yesterday", "yesterday", "this_day", "this_period", "last_period"])
        if kind == "yesterday":
            time = (kind, rng.choice(DAY_PARTS) if rng.random() < 0.4 else None)
        elif kind == "this_day":
            time = (kind, rng.choice(DAY_PARTS))
        else:
            time = (kind, rng.choice(PERIODS))
    return Clause(subject, verb, number, adjective, noun, place, time)


@dataclass
class _Spans:
    """Where each part of a clause landed in the English sentence, for linking the Chinese to it."""

    subject: list[int]
    verb: int
    number: int
    adjective: int | None
    noun: list[int]  # "cups of tea": cups, of, tea
    place: tuple[int, int | None, int] | None  # (preposition, "the" or None, place noun)
    time: list[int] = field(default_factory=list)
    time_zh: list[tuple[str, str, list[int]]] = field(default_factory=list)


def _add_english(b: _Builder, c: Clause) -> _Spans:
    """Append the English clause, S V O [PLACE] [TIME], and return where its parts landed."""
    s_idx = b.src(*c.subject[0])
    v_idx = b.src(c.verb[0])[0]
    plural = c.number[0] != "a"
    noun_en = c.noun[0] if not plural else IRREGULAR_PLURAL.get(c.noun[0], c.noun[0] + "s")
    first = (c.adjective[0] if c.adjective else noun_en)
    num_en = "an" if c.number[0] == "a" and first.startswith(VOWEL_SOUND) else c.number[0]
    n_idx = b.src(num_en)[0]
    a_idx = b.src(c.adjective[0])[0] if c.adjective else None
    o_idx = b.src(*noun_en.split())
    place = None
    if c.place:
        p_prep, p_the = b.src(c.place[2])[0], None
        if c.place[0] != "home":
            p_the = b.src("the")[0]
        place = (p_prep, p_the, b.src(c.place[0])[0])
    spans = _Spans(s_idx, v_idx, n_idx, a_idx, o_idx, place)
    if c.time:
        t_en, spans.time_zh = _time_words(c.time)
        spans.time = b.src(*t_en)
    return spans


def _add_zh_subject(b: _Builder, c: Clause, s_idx: list[int]) -> None:
    """Append the Chinese subject, linking 的 and English "the" as possible only."""
    subj_en, subj_zh = c.subject
    for k, word in enumerate(subj_zh):
        if word == "的":
            j = b.tgt(word, FUNCTION)
            b.link(s_idx[0], j, sure=False)  # possessive: my -> 我 的
        else:
            j = b.tgt(word, CONTENT)
            b.link(s_idx[0] if k == 0 and len(subj_zh) > 1 else s_idx[-1], j)
    if subj_en[0] == "the":
        b.link(s_idx[0], j, sure=False)  # "the" teacher -> 老师


def _add_zh_time(b: _Builder, spans: _Spans) -> None:
    """Append the Chinese time phrase (empty when the clause has none) after the subject."""
    for word, role, offsets in spans.time_zh:
        j = b.tgt(word, role)
        for o in offsets:
            b.link(spans.time[o], j)
        if not offsets:  # 个 in 上 个 星期
            for i in spans.time:
                b.link(i, j, sure=False)


def _add_zh_place(b: _Builder, c: Clause, spans: _Spans) -> None:
    """Append 在 and the Chinese place word, when the clause has a place."""
    if c.place and spans.place:
        p_prep, p_the, p_noun = spans.place
        j = b.tgt("在", FUNCTION)
        b.link(p_prep, j)
        j = b.tgt(c.place[1], CONTENT)
        b.link(p_noun, j)
        if p_the is not None:
            b.link(p_the, j, sure=False)


def _add_zh_verb(b: _Builder, c: Clause, spans: _Spans) -> None:
    """Append the Chinese verb and 了, which has no source word and links possibly to verb and time."""
    j = b.tgt(c.verb[1], CONTENT)
    b.link(spans.verb, j)
    j = b.tgt("了", FUNCTION)  # perfective: no source word; hangs between the verb and the time
    b.link(spans.verb, j, sure=False)
    for i in spans.time:
        b.link(i, j, sure=False)


def _add_zh_object(b: _Builder, c: Clause, spans: _Spans) -> None:
    """Append the Chinese object: number, measure word, [adjective], noun."""
    o_idx = spans.noun
    head = o_idx[-1] if len(o_idx) > 1 else o_idx[0]  # the word that is the Chinese noun
    container = o_idx[0] if len(o_idx) > 1 else None  # "cup" -> measure word 杯
    j = b.tgt(c.number[1], CONTENT)
    b.link(spans.number, j)
    j = b.tgt(c.noun[2], FUNCTION)  # measure word
    if container is not None:
        b.link(container, j)  # cup -> 杯 translates
        b.link(o_idx[1], j, sure=False)  # "of"
    else:
        b.link(head, j, sure=False)
        b.link(spans.number, j, sure=False)
    if c.adjective:
        assert spans.adjective is not None  # set whenever there is an adjective
        j = b.tgt(c.adjective[1], CONTENT)
        b.link(spans.adjective, j)
    j = b.tgt(c.noun[1], CONTENT)
    b.link(head, j)


def _add_clause(b: _Builder, c: Clause) -> None:
    """Append one clause to both sides: English S V O [PLACE] [TIME], Chinese S [TIME] [PLACE] V 了 O."""
    spans = _add_english(b, c)
    _add_zh_subject(b, c, spans.subject)
    _add_zh_time(b, spans)
    _add_zh_place(b, c, spans)
    _add_zh_verb(b, c, spans)
    _add_zh_object(b, c, spans)

def make_pair(clauses: list[Clause]) -> Pair:
    b = _Builder()
    for k, c in enumerate(clauses):
        if k:
            i = b.src("and")[0]
            j = b.tgt("，", PUNCT)
            b.link(i, j)
        _add_clause(b, c)
    i = b.src(".")[0]
    j = b.tgt("。", PUNCT)
    b.link(i, j)
    return b.pair


def generate(n: int, seed: int = 0, min_clauses: int = 1, max_clauses: int = 2,
             exclude: set[str] | None = None) -> list[Pair]:
    """`n` distinct pairs of min..max clauses (clause count uniform), skipping sources in `exclude`."""
    rng = random.Random(seed)
    seen = set(exclude or ())
    pairs: list[Pair] = []
    attempts = 0
    while len(pairs) < n:
        attempts += 1
        if attempts > 50 * n + 1000:
            raise ValueError(f"cannot draw {n} distinct sentences from this grammar")
        k = rng.randint(min_clauses, max_clauses)
        pair = make_pair([random_clause(rng) for _ in range(k)])
        key = " ".join(pair.src)
        if key in seen:
            continue
        seen.add(key)
        pairs.append(pair)
    return pairs


def example_pairs() -> list[Pair]:
    """The demo's two example sentences: *i ate an apple yesterday* and *she read two new books
    in the library last week*."""
    i = next(s for s in SUBJECTS if s[0] == ["i"])
    she = next(s for s in SUBJECTS if s[0] == ["she"])
    noun = {n[0]: n for n in NOUNS}
    first = Clause(i, ("ate", "吃"), ("a", "一"), None, noun["apple"], None, ("yesterday", None))
    second = Clause(she, ("read", "读"), ("two", "两"), ("new", "新"), noun["book"],
                    ("library", "图书馆", "in"), ("last_period", ("week", "星期")))
    return [make_pair([first]), make_pair([second])]
