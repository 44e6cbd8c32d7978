"""Markup carried across a translation (engine/decode/markup.py): hand-made cases with known answers, and
random lines, well- and ill-formed, on which the invariants must hold."""

import random
from collections import Counter
from html.parser import HTMLParser

import pytest

from rnnsearch.engine.decode.markup import VOID, parse, transfer, translate_markup


class _Reader(HTMLParser):
    """html.parser's reading of a line: its raw tags, its text, and the pairs that do not nest."""

    def __init__(self, markup):
        super().__init__(convert_charrefs=True)
        self.tags, self.text, self.open, self.errors = [], [], [], []
        self.feed(markup)
        self.close()
        self.text = "".join(self.text)

    def handle_starttag(self, tag, attrs):
        self.tags.append(self.get_starttag_text())
        self.open.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(self.get_starttag_text())

    def parse_endtag(self, i):  # the end tag as written (html.parser hands on only its name)
        j = super().parse_endtag(i)
        if j > i:
            self.tags.append(self.rawdata[i:j])
        return j

    def handle_endtag(self, tag):
        while self.open and self.open[-1] != tag and self.open[-1] in VOID:  # <br> needs no </br>
            self.open.pop()
        if not self.open or self.open.pop() != tag:
            self.errors.append(f"</{tag}> closes no open <{tag}>")

    def handle_comment(self, data):
        self.tags.append(f"<!--{data}-->")

    def handle_data(self, data):
        self.text.append(data)


def check(source, output, translation):
    """The promises: the output is well-formed, holds each tag of the source once, as written (plus
    the made-up repairs), and its text is the translation; the text of the source is not lost."""
    marked, before = parse(source), _Reader(source)
    assert marked.text == " ".join(before.text.split()), source
    check_output(marked, output, translation, Counter(before.tags))


def check_output(marked, output, translation, source_tags):
    after = _Reader(output)
    made_up = [t.start for t in marked.tags if t.repaired == "opened"]
    made_up += [t.end for t in marked.tags if t.repaired == "closed"]
    assert Counter(after.tags) == source_tags + Counter(made_up), output
    assert not after.errors and all(tag in VOID for tag in after.open), output
    assert after.text == " ".join(translation.split()), output


def carry(source, translation, links):
    output = transfer(parse(source), translation, links)
    check(source, output, translation)
    return output


ONE_TO_ONE = [(0, 0), (1, 1), (2, 2)]
SWAP = [(0, 0), (1, 2), (2, 1)]  # the red house -> la maison rouge


def test_one_tag_one_word():
    marked = parse("the <b>red</b> house")
    assert marked.text == "the red house"
    assert [(t.start, t.end, t.first, t.last) for t in marked.tags] == [("<b>", "</b>", 1, 2)]
    assert carry("the <b>red</b> house", "la rouge maison", ONE_TO_ONE) == "la <b>rouge</b> maison"


def test_reordering_moves_the_tag():
    assert carry("the <b>red</b> house", "la maison rouge", SWAP) == "la maison <b>rouge</b>"
    assert carry("a <b>b</b> <i>c</i>", "C B A", [(0, 2), (1, 1), (2, 0)]) == "<i>C</i> <b>B</b> A"


def test_one_word_to_several_grows_the_span():
    links = [(0, 0), (1, 2), (1, 3), (2, 1)]  # saw -> "ai vu"
    assert carry("I <b>saw</b> it", "je l' ai vu", links) == "je l' <b>ai vu</b>"
    # aligned to words 0 and 2: the span runs from the first to the last, word 1 included
    assert carry("<b>x</b> y", "A B C", [(0, 0), (0, 2), (1, 1)]) == "<b>A B C</b>"


def test_nested_tags_stay_nested():
    source = "<b>the <i>red</i> house</b> is big"
    links = [(0, 0), (1, 2), (2, 1), (3, 3), (4, 4)]
    marked = parse(source)
    assert [(t.first, t.last, t.parent) for t in marked.tags] == [(0, 3, None), (1, 2, 0)]
    assert carry(source, "la maison rouge est grande", links) == "<b>la maison <i>rouge</i></b> est grande"
    # an unaligned child is a point kept inside its parent, at the parent's nearer end
    assert carry("<b>x <i>y</i></b> z", "X Z Y", [(0, 0), (2, 1)]) == "<b>X<i></i></b> Z Y"


def test_attributes_are_kept_byte_for_byte():
    start = """<a href="http://x?a=1&amp;b=2" class='c'>"""
    assert carry(f"{start}link</a> here", "lien ici", [(0, 0), (1, 1)]) == f"{start}lien</a> ici"
    start = '<A TITLE="x>y">'  # ">" inside quotes, capitals
    assert carry(f"{start}z</a>", "Z", [(0, 0)]) == f"{start}Z</a>"


def test_void_and_self_closing_tags_go_before_the_next_word():
    source = "one <br/>two <br>three"
    assert parse(source).text == "one two three"
    assert carry(source, "un deux trois", ONE_TO_ONE) == "un <br/>deux <br>trois"
    assert carry(source, "trois deux un", [(0, 2), (1, 1), (2, 0)]) == "<br>trois <br/>deux un"
    assert carry("one two<br>", "un deux", [(0, 0), (1, 1)]) == "un deux<br>"  # at the end: after
    assert carry("a <!-- c --> b", "A B", [(0, 0), (1, 1)]) == "A <!-- c -->B"
    assert carry("<br>x</br> y", "X Y", [(0, 0), (1, 1)]) == "<br>X</br> Y"  # closed: a pair


def test_entities_are_decoded_for_the_model_and_escaped_in_the_output():
    source = "Tom &amp; <b>Jerry</b> &lt;3 &#233;t&#xE9;"
    assert parse(source).text == "Tom & Jerry <3 été"
    links = [(i, i) for i in range(5)]
    assert carry(source, "Tom & Jerry <3 été", links) == "Tom &amp; <b>Jerry</b> &lt;3 été"
    assert carry("<b>x</b>", "a<b>c & d", [(0, 0)]) == "<b>a&lt;b&gt;c</b> &amp; d"


def test_no_tags_and_empty_lines():
    assert carry("a &amp; b", "x & y", ONE_TO_ONE) == "x &amp; y"
    assert carry("  many   spaces ", "beaucoup d'espaces", [(0, 0), (1, 1)]) == "beaucoup d'espaces"
    assert parse("").text == "" and parse("").tags == ()
    assert transfer(parse(""), "", []) == ""
    assert carry("<b></b>", "", []) == "<b></b>"


def test_unaligned_tags_are_written_empty_not_dropped():
    # before the target word of the next aligned source word
    links = [(0, 0), (2, 1), (3, 2)]
    assert carry("the <b>very</b> big house", "la grande maison", links) == "la <b></b>grande maison"
    # nothing aligned after it: after the last aligned word before it
    assert carry("house <b>very</b>", "maison", [(0, 0)]) == "maison<b></b>"
    # no links at all: at the start if it was at the start, else at the end
    assert carry("<b>x</b> y", "A B", []) == "<b></b>A B"
    assert carry("x <b>y</b>", "A B", []) == "A B<b></b>"
    # empty pairs and points at one position keep their order
    assert carry("<b></b><i></i>x", "X", [(0, 0)]) == "<b></b><i></i>X"


def test_links_outside_either_sentence_are_ignored():
    assert carry("the <b>red</b> house", "la rouge", [(0, 0), (1, 1), (1, 7), (9, 0), (-1, 1)]) \
        == "la <b>rouge</b>"


def test_unclosed_tag_is_closed_at_the_end():
    marked = parse("the <b>red house")
    assert [(t.start, t.end, t.first, t.last, t.repaired) for t in marked.tags] == \
        [("<b>", "</b>", 1, 3, "closed")]
    assert carry("the <b>red house", "la maison rouge", SWAP) == "la <b>maison rouge</b>"
    assert carry("x <B>y", "X Y", [(0, 0), (1, 1)]) == "X <B>Y</B>"  # the name as written
    assert carry("<b>", "", []) == "<b></b>"


def test_stray_end_tag_is_opened_at_the_start():
    marked = parse("the red</i> house")
    assert [(t.start, t.end, t.first, t.last, t.repaired) for t in marked.tags] == \
        [("<i>", "</i>", 0, 2, "opened")]
    assert carry("the red</i> house", "la maison rouge", SWAP) == "<i>la maison rouge</i>"
    assert carry("x</br> y", "X Y", [(0, 0), (1, 1)]) == "X <br></br>Y"  # a void element's: just before
    assert carry("<B>x</i>", "X", [(0, 0)]) == "<i><B>X</B></i>"


def test_overlapping_tags_are_cut_to_nest():
    # <i> crosses <b>: it keeps the larger of its parts, the one outside <b> on a tie
    marked = parse("<b>a <i>b</b> c</i>")
    assert [(t.start, t.first, t.last, t.parent) for t in marked.tags] == \
        [("<b>", 0, 2, None), ("<i>", 2, 3, None)]
    assert carry("<b>a <i>b</b> c</i>", "A B C", ONE_TO_ONE) == "<b>A B</b> <i>C</i>"
    assert carry("<b>a <i>b c</b> d</i>", "A B C D", [(i, i) for i in range(4)]) == "<b>A <i>B C</i></b> D"
    # siblings whose target spans cross: the earlier keeps its span, the later the part with more
    # of its aligned words (C inside, D outside: a tie, so outside)
    links = [(0, 0), (1, 2), (2, 1), (3, 3)]
    assert carry("<b>a b</b> <i>c d</i>", "A C B D", links) == "<b>A C B</b> <i>D</i>"
    links = [(0, 0), (1, 3), (2, 1), (2, 2), (3, 4)]  # C C' inside, D outside
    assert carry("<b>a b</b> <i>c d</i>", "A C C' B D", links) == "<b>A <i>C C'</i> B</b> D"


def test_lone_angle_brackets_are_text():
    assert parse("a < b").text == "a < b" and parse("a < b").tags == ()
    assert carry("a < b", "x < y", ONE_TO_ONE) == "x &lt; y"
    assert carry("1 <2 > 0", "1 <2 > 0", ONE_TO_ONE) == "1 &lt;2 &gt; 0"
    marked = parse('<a href="x>z')  # its quote never closes: not a tag
    assert marked.text == '<a href="x>z' and marked.tags == ()


def test_tags_inside_a_word_snap_to_the_whole_word():
    marked = parse("un<b>believ</b>able story")
    assert marked.text == "unbelievable story" and (marked.tags[0].first, marked.tags[0].last) == (0, 1)
    assert carry("un<b>believ</b>able story", "histoire incroyable", [(0, 1), (1, 0)]) \
        == "histoire <b>incroyable</b>"
    # two tags in one word enclose the same word: they nest, the earlier outside
    assert carry("<b>a</b><i>b</i> c", "AB C", [(0, 0), (1, 1)]) == "<b><i>AB</i></b> C"
    assert carry("x<br>y z", "XY Z", [(0, 0), (1, 1)]) == "<br>XY Z"  # a point in a word: before it


def test_translate_markup_sends_plain_text_once():
    calls = []

    def upper(sentences):
        calls.append(sentences)
        return [(s.upper(), [(i, i) for i in range(len(s.split()))]) for s in sentences]

    lines = ["the <b>red</b> house", "", "a & b", "<br>", "   "]
    assert translate_markup(lines, upper) == ["THE <b>RED</b> HOUSE", "", "A &amp; B", "<br>", ""]
    assert calls == [["the red house", "a & b"]]
    assert translate_markup(["", "<b></b>"], upper) == ["", "<b></b>"] and len(calls) == 1
    with pytest.raises(ValueError, match="1 translations for 2 sentences"):
        translate_markup(["a", "b"], lambda sentences: [("x", [])])


WORDS = ["the", "red", "house", "Tom", "&amp;", "&lt;3", "x&gt;y", "AT&T", "&#233;t&#xE9;", "<", "a/b"]
PAIRS = [("<b>", "</b>"), ("<i>", "</i>"), ('<a href="http://x?a=1&amp;b=2">', "</a>"),
         ("<span class='c' title=\"x>y\">", "</span>"), ("<B>", "</b>"), ("<I>", "</I>")]
POINTS = ["<br>", "<br/>", "<br />", '<img src="a.png">', "<!-- note -->", "<hr>"]
STRAY = ["</br>", "</span>", "</u>"]
TARGET = ["la", "maison", "rouge", "&", "<", "a<b>", ">", "&amp;", "été", "x"]


def random_line(rng, well_formed):
    """Words, pairs, points and (unless `well_formed`) unpaired and stray tags, glued or spaced."""
    pieces, open_ = [], []
    for _ in range(rng.randint(0, 12)):
        roll = rng.random()
        if roll < 0.5:
            word = rng.choice(WORDS)
            pieces.append(word + " " if word == "<" else word)  # "<" then a letter would be a tag
        elif roll < 0.65:
            pair = rng.choice(PAIRS)
            pieces.append(pair[0])
            open_.append(pair)
        elif roll < 0.8 and open_:
            pair = open_.pop() if well_formed else open_.pop(rng.randrange(len(open_)))
            pieces.append(pair[1])
        elif roll < 0.9 or well_formed:
            pieces.append(rng.choice(POINTS))
        else:
            pieces.append(rng.choice(STRAY))
        pieces.append(rng.choice([" ", "", "  "]))
    if well_formed or rng.random() < 0.5:
        pieces += [end for _, end in reversed(open_)]
    return "".join(pieces)


@pytest.mark.parametrize("seed", range(4))
def test_random_lines_keep_the_invariants(seed):
    rng = random.Random(seed)
    for case in range(100):
        source = random_line(rng, well_formed=case % 2 == 0)
        marked = parse(source)
        n_src = len(marked.text.split())
        translation = " ".join(rng.choice(TARGET) for _ in range(rng.randint(0, 8)))
        n_tgt = len(translation.split())
        density = rng.random()
        links = [(i, j) for i in range(n_src + 1) for j in range(n_tgt + 1) if rng.random() < density / 2]
        check(source, transfer(marked, translation, links), translation)
        # translated word for word, the markup comes back where it was
        again = parse(transfer(marked, marked.text, [(i, i) for i in range(n_src)]))
        assert again.text == marked.text
        assert [(t.start, t.end, t.first, t.last, t.parent) for t in again.tags] == \
            [(t.start, t.end, t.first, t.last, t.parent) for t in marked.tags], source


def test_garbage_never_raises_and_comes_out_well_formed():
    rng = random.Random(7)
    for _ in range(300):
        source = "".join(rng.choice("<>/b i=\"'&;!-x ") for _ in range(rng.randint(0, 30)))
        marked = parse(source)
        translation = " ".join(rng.choice(TARGET) for _ in range(rng.randint(0, 6)))
        n_src, n_tgt = len(marked.text.split()), len(translation.split())
        links = [(rng.randrange(n_src + 1), rng.randrange(n_tgt + 1)) for _ in range(rng.randint(0, 6))]
        # the tags as parse read them: html.parser may read garbage differently on its input side
        written = Counter(t.start for t in marked.tags if t.repaired != "opened")
        written += Counter(t.end for t in marked.tags if t.end and t.repaired != "closed")
        check_output(marked, transfer(marked, translation, links), translation, written)
