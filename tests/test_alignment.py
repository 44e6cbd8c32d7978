"""Pharaoh I/O and the alignment scores, on hand-made cases."""

from pathlib import Path

import numpy as np
import pytest

from rnnsearch.config import ConfigError
from rnnsearch.engine.align.links import (
    aer,
    argmax_links,
    content_word_accuracy,
    format_pharaoh,
    parse_pharaoh,
    threshold_links,
)


def test_pharaoh_round_trip_and_errors():
    sure, possible = parse_pharaoh("0-0 1-2-P 2-1")
    assert sure == {(0, 0), (2, 1)} and possible == {(0, 0), (1, 2), (2, 1)}
    assert format_pharaoh(sure, possible) == "0-0 1-2-P 2-1"
    with pytest.raises(ValueError, match="bad link '1-x'"):
        parse_pharaoh("0-0 1-x", "gold.txt:3")


def test_aer_on_hand_made_cases():
    sure = [{(0, 0), (1, 1)}]
    possible = [{(0, 0), (1, 1), (2, 1)}]
    perfect = aer([{(0, 0), (1, 1)}], sure, possible)
    assert perfect["aer"] == 0.0 and perfect["precision"] == 1.0 and perfect["recall"] == 1.0
    # a possible link costs nothing in precision; a wrong one does
    assert aer([{(0, 0), (1, 1), (2, 1)}], sure, possible)["aer"] == 0.0
    wrong = aer([{(0, 0), (0, 1)}], sure, possible)
    # |A∩S| = 1, |A∩P| = 1, |A| = 2, |S| = 2 -> 1 - 2/4
    assert wrong["aer"] == pytest.approx(0.5)
    assert wrong["precision"] == 0.5 and wrong["recall"] == 0.5
    assert aer([set()], sure, possible)["aer"] == 1.0


def test_links_from_attention_and_content_accuracy():
    weights = [[0.7, 0.2, 0.1], [0.1, 0.5, 0.4], [0.05, 0.15, 0.8]]  # rows: target words
    assert argmax_links(weights) == {(0, 0), (1, 1), (2, 2)}
    assert threshold_links(weights, 0.3) == {(0, 0), (1, 1), (2, 1), (2, 2)}
    sure = [{(0, 0), (2, 1), (2, 2)}]
    roles = [["content", "content", "punct"]]
    # word 0 attends to its gold source (hit), word 1 does not (gold 2, argmax 1), word 2 is punctuation
    assert content_word_accuracy([weights], sure, roles) == 0.5


def test_naacl_reader(tmp_path):
    from rnnsearch.engine.align.links import read_naacl
    from rnnsearch.io import DataError

    gold = tmp_path / "g.wa"
    gold.write_text("0001 1 1 S\n0001 2 3 P\n0002 1 2 S\n")
    sure, possible = read_naacl(gold, 2)
    # English first in the file; returned as (French = source, English = target), 0-based
    assert sure == [{(0, 0)}, {(1, 0)}] and possible == [{(0, 0), (2, 1)}, {(1, 0)}]
    gold.write_text("0003 1 1 S\n")
    with pytest.raises(DataError, match="g.wa:1: link"):
        read_naacl(gold, 2)


def _align_reversal(model, tmp_path, n: int, *flags: str) -> tuple[dict, Path]:
    """`rnnsearch align --gold` on n reversal pairs whose gold links are the anti-diagonal:
    the scores it prints, and where the links went (--out)."""
    import json
    import subprocess
    import sys

    from conftest import TOY

    from rnnsearch.tools.toy import toy_pairs

    src, tgt = toy_pairs(n, "reverse", seed=21, **TOY)
    gold = [" ".join(f"{len(s.split()) - 1 - j}-{j}" for j in range(len(s.split()))) for s in src]
    for name, lines in (("src", src), ("tgt", tgt), ("gold", gold)):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    res = subprocess.run([sys.executable, "-m", "rnnsearch", "align", "--model", str(model),
                          "--src", str(tmp_path / "src"), "--tgt", str(tmp_path / "tgt"),
                          "--gold", str(tmp_path / "gold"), "--out", str(tmp_path / "out.align"), *flags],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout), tmp_path / "out.align"


def test_align_command_scores_a_reversal_model(reverse_model, tmp_path):
    scores, out_file = _align_reversal(reverse_model, tmp_path, 40)
    assert scores["aer"] < 0.2 and scores["sentences"] == 40
    out = out_file.read_text().splitlines()
    assert len(out) == 40 and all("-" in x for x in out)


def test_an_ensemble_averages_the_models_word_weights(reverse_model, tmp_path):
    from rnnsearch.engine.align.links import attention_links, mean_weights

    # two models, two pairs (one word by two, </s> rows last): they disagree on pair 0's first row
    a = [[[0.9, 0.1], [0.2, 0.8]], [[1.0]]]
    b = [[[0.2, 0.8], [0.4, 0.6]], [[1.0]]]
    c = [[[0.5, 0.5], [0.3, 0.7]], [[1.0]]]
    mean = mean_weights([a, b, c])
    np.testing.assert_allclose(mean[0], [[1.6 / 3, 1.4 / 3], [0.3, 0.7]])
    assert mean[1] == [[1.0]]
    assert attention_links(mean[0]) == {(0, 0)} and attention_links(b[0]) == {(1, 0)}
    # the command: one model given twice aligns as the model alone, and says it was an ensemble
    alone, links = _align_reversal(reverse_model, tmp_path, 20)
    twice, links2 = _align_reversal(reverse_model, tmp_path, 20, "--model", str(reverse_model))
    assert links.read_text() == links2.read_text() and twice["aer"] == alone["aer"]
    assert twice["ensemble"] == [2, 0] and "ensemble" not in alone


def test_symmetrisation_on_hand_made_cases():
    from rnnsearch.engine.align.links import flip, symmetrize

    diagonal = {(0, 0), (1, 1), (2, 2)}
    # a stray link far from the agreed ones, between words that are already linked: only union keeps it
    forward, backward = diagonal | {(0, 2)}, diagonal
    assert symmetrize(forward, backward, "intersection") == diagonal
    assert symmetrize(forward, backward, "union") == diagonal | {(0, 2)}
    assert symmetrize(forward, backward, "grow-diag-final-and") == diagonal
    # grow: a neighbour of an agreed link whose target word has no link yet joins
    assert symmetrize({(0, 0), (1, 1), (1, 2)}, {(0, 0), (1, 1)}) == {(0, 0), (1, 1), (1, 2)}
    # ... and the growth goes on from links just added (diagonally here)
    assert symmetrize({(0, 0), (1, 1), (2, 2)}, {(0, 0)}) == diagonal
    # final-and: a link of one direction, far from the rest, between two unlinked words
    assert symmetrize({(0, 0), (3, 3)}, {(0, 0)}) == {(0, 0), (3, 3)}
    # but not one whose source word is taken already
    assert symmetrize({(0, 0), (0, 3)}, {(0, 0)}) == {(0, 0)}
    # the reverse model's links are (its source = our target, its target = our source)
    assert flip({(2, 0), (0, 1)}) == {(0, 2), (1, 0)}
    with pytest.raises(ValueError, match="grow-diag-final-and"):
        symmetrize(diagonal, diagonal, "gdfa")


def test_soft_symmetrisation_combines_the_attention_before_links_are_made():
    from rnnsearch.engine.align.links import attention_links, flip, soft_links, symmetrize

    # two words each way; rows of the forward attention are target words (then </s>), columns
    # source words; the backward model's rows are source words. The forward model puts both
    # target words on source word 0 (a near tie for y1); the backward model is sure of the diagonal.
    forward = [[0.55, 0.45], [0.55, 0.45], [0.5, 0.5]]
    backward = [[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]]
    # g = sqrt(fwd * bwd^T) = [[.70, .30], [.23, .60]]: each word's best is the other's best
    assert soft_links(forward, backward) == {(0, 0), (1, 1)}
    # the hard intersection loses y1: the forward model alone chose x0 for it
    hard = symmetrize(attention_links(forward), flip(attention_links(backward)), "intersection")
    assert hard == {(0, 0)}
    # with a threshold, every combined weight over it links too (g[0][1] = 0.30: x1-y0)
    assert soft_links(forward, backward, "threshold", 0.25) == {(0, 0), (1, 1), (1, 0)}
    assert soft_links(forward, backward, "threshold", 0.65) == {(0, 0), (1, 1)}
    # a target word whose best source word prefers another target word stays unlinked
    forward = [[0.9, 0.1], [0.8, 0.2], [0.1, 0.9], [0.3, 0.7]]
    backward = [[0.9, 0.05, 0.05], [0.1, 0.1, 0.8], [0.5, 0.2, 0.3]]
    assert soft_links(forward, backward) == {(0, 0), (1, 2)}
    # shift=1 reads row i+1 of both models for word i
    forward = backward = [[0.5, 0.5], [0.9, 0.1], [0.1, 0.9]]
    assert soft_links(forward, backward, shift=1) == {(0, 0), (1, 1)}
    assert soft_links(forward, backward) != {(0, 0), (1, 1)}
    with pytest.raises(ValueError, match="disagree"):
        soft_links([[1.0], [1.0]], [[0.5, 0.5], [1.0, 0.0], [1.0, 0.0]])


def test_align_command_symmetrises_two_directions_and_shifts(reverse_model, tmp_path):
    # the reversal task is its own inverse, so the reversal model serves as both directions
    import json
    import subprocess
    import sys

    from conftest import TOY

    from rnnsearch.engine.align.links import parse_pharaoh
    from rnnsearch.tools.toy import toy_pairs

    src, tgt = toy_pairs(30, "reverse", seed=22, **TOY)
    gold = [" ".join(f"{len(s.split()) - 1 - j}-{j}" for j in range(len(s.split()))) for s in src]
    for name, lines in (("src", src), ("tgt", tgt), ("gold", gold)):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    files = ["--src", str(tmp_path / "src"), "--tgt", str(tmp_path / "tgt")]
    both_ways = ["--reverse-model", str(reverse_model)]
    runs = {"forward": files, "backward": ["--src", str(tmp_path / "tgt"), "--tgt", str(tmp_path / "src")],
            "intersection": files + both_ways + ["--symmetrize", "intersection"],
            "union": files + both_ways + ["--symmetrize", "union"],
            "gdfa": files + both_ways, "shifted": files + ["--shift", "1"],
            "soft": files + both_ways + ["--symmetrize", "soft"]}
    found = {}
    for label, extra in runs.items():
        cmd = ["align", "--model", str(reverse_model), *extra, "--gold", str(tmp_path / "gold"),
               "--out", str(tmp_path / label)]
        res = subprocess.run([sys.executable, "-m", "rnnsearch", *cmd], capture_output=True, text=True,
                             timeout=120)
        assert res.returncode == 0, res.stderr
        lines = (tmp_path / label).read_text().splitlines()
        found[label] = ([parse_pharaoh(x)[0] for x in lines], json.loads(res.stdout))
    back = [{(i, j) for j, i in links} for links in found["backward"][0]]
    for k, fwd in enumerate(found["forward"][0]):
        assert found["intersection"][0][k] == fwd & back[k]
        assert found["union"][0][k] == fwd | back[k]
        assert found["intersection"][0][k] <= found["gdfa"][0][k] <= found["union"][0][k]
        # one link per target word, whichever row is read
        assert sorted(j for _, j in found["shifted"][0][k]) == list(range(len(tgt[k].split())))
        # soft, argmax: words that are each other's best, so no word has two links
        soft = found["soft"][0][k]
        assert len({i for i, _ in soft}) == len({j for _, j in soft}) == len(soft) > 0
    assert found["gdfa"][1]["symmetrize"] == "grow-diag-final-and" and found["shifted"][1]["shift"] == 1
    assert found["soft"][1]["symmetrize"] == "soft" and found["soft"][1]["aer"] < 0.2
    assert found["intersection"][1]["recall"] <= found["union"][1]["recall"]  # recall only grows with links


def test_attention_links_read_alpha_i_or_the_shifted_row():
    from types import SimpleNamespace

    from rnnsearch.engine.align.links import attention_links, word_attention
    from rnnsearch.io import DataError

    words = [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]]  # α_1, α_2 and the </s> row, over two source words
    assert attention_links(words) == {(0, 0), (1, 1)}
    assert attention_links(words, shift=1) == {(1, 0), (0, 1)}  # y_1 by α_2, y_2 by the </s> row
    assert attention_links(words, "threshold", 0.15) == {(0, 0), (1, 1), (0, 1)}
    encdec = SimpleNamespace(cfg=SimpleNamespace(model=SimpleNamespace(arch="rnnencdec")), model_dir="m")
    with pytest.raises(DataError, match="m: an RNNencdec model has no attention"):
        word_attention(encdec, ["a b"], ["c d"])


# -- links out of every translation (rnnsearch translate --alignment, Translation.alignment) -------

def _dog():
    """'Ein Hund' -> 'A dog' over sentencepiece pieces, with known attention: rows ▁A, ▁do, g and
    </s>, columns ▁Ein, ▁Hu, nd."""
    from rnnsearch.engine.decode.translator import Translation

    attention = [[0.8, 0.1, 0.1], [0.1, 0.3, 0.6], [0.3, 0.5, 0.2], [0.6, 0.2, 0.2]]
    return Translation("A dog", ["▁A", "▁do", "g"], -0.5, ["▁Ein", "▁Hu", "nd"], attention, source="Ein Hund")


def test_translation_links_merge_pieces_to_words_and_shift():
    from rnnsearch.engine.align.links import DEFAULT_SHIFT

    t = _dog()
    assert DEFAULT_SHIFT == 0
    # words: "Hund" sums ▁Hu + nd; "dog" is the mean of the rows of ▁do and g
    assert t.alignment_weights() == [pytest.approx([0.8, 0.2]), pytest.approx([0.2, 0.8])]
    assert t.alignment == t.links() == [(0, 0), (1, 1)]
    # shift 1: "A" by the row of "dog", "dog" by the </s> row ([0.6, 0.4])
    assert t.links(shift=1) == [(0, 1), (1, 0)]
    assert t.links(subwords=True) == [(0, 0), (1, 2), (2, 1)]
    assert t.links(subwords=True, shift=1) == [(0, 2), (1, 1), (2, 0)]
    assert t.alignment_weights(subwords=True) == t.attention[:3]
    with pytest.raises(ValueError, match="shift must be 0 or 1"):
        t.links(shift=2)


def test_translation_links_without_attention_and_of_empty_lines():
    from rnnsearch.engine.decode.translator import Translation

    assert Translation("a", ["a"], 0.0, ["b"], None, source="b").alignment is None
    assert Translation("", [], 0.0, [], [], source="").alignment == []  # an empty input line
    empty_output = Translation("", [], 0.0, ["x"], [[1.0]], source="x")  # only the </s> row
    assert empty_output.alignment == [] and empty_output.links(shift=1) == []
    assert empty_output.alignment_weights() == []


def test_link_indices_are_the_words_of_the_line_as_given():
    """The model reads normalize(line): a NUL splits "Hund\\x00lief" in two, a zero-width space
    alone is no word. Links still index line.split()."""
    from rnnsearch.engine.align.links import source_word_of_pieces
    from rnnsearch.engine.decode.translator import Translation

    source = "der  \u200b Hund\x00lief"
    assert source.split() == ["der", "\u200b", "Hund\x00lief"]
    assert source_word_of_pieces(source, ["der", "Hund", "lief"], True) == [0, 2, 2]
    assert source_word_of_pieces(source, ["▁der", "▁Hu", "nd", "▁lief"], False) == [0, 2, 2, 2]
    rows = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.2, 0.3, 0.5]]
    t = Translation("the dog ran", ["the", "dog", "ran"], 0.0, ["der", "Hund", "lief"], rows, source=source,
                    pieces_are_words=True)
    assert t.alignment_weights() == [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]
    assert t.alignment == [(0, 0), (2, 1), (2, 2)]


def test_target_words_are_those_of_the_decoded_text():
    """Sentencepiece writes an unknown piece as " ⁇ ", a word of its own, and byte pieces as the
    UTF-8 they spell: the word indices follow text.split() of the decoded output."""
    from rnnsearch.engine.align.links import target_word_of_pieces, unknown_target_words

    pieces = ["▁le", "▁", "<unk>", "▁c", "hat"]  # decoded: "le  ⁇  chat"
    assert target_word_of_pieces(pieces, False, 3) == [0, 1, 1, 2, 2]
    assert unknown_target_words(pieces, False, 3) == [1]
    assert target_word_of_pieces(["▁de", "<unk>"], False, 2) == [0, 1]  # "de ⁇"
    # "▁" then the two bytes of "ж", then "▁x": " ж x", two words
    assert target_word_of_pieces(["▁", "<0xD0>", "<0xB6>", "▁x"], False, 2) == [0, 0, 0, 1]
    assert target_word_of_pieces(["le", "<unk>", "chat"], True, 3) == [0, 1, 2]
    assert unknown_target_words(["le", "<unk>", "chat"], True, 3) == [1]


def test_soft_links_text():
    from rnnsearch.engine.align.links import format_soft

    text = format_soft(_dog().alignment_weights())
    assert text == "0:0=0.800,1=0.200 1:0=0.200,1=0.800"
    assert format_soft([[1.0, 0.0001]]) == "0:0=1.000"  # weights rounding to zero are left out
    assert format_soft([]) == ""


def test_read_lexicon_keeps_the_best_target_and_names_bad_lines(tmp_path):
    from rnnsearch.engine.align.links import read_lexicon
    from rnnsearch.io import DataError

    lex = tmp_path / "lex.tsv"
    lex.write_text("zebra\tcheval\t0.1\nzebra\tzèbre\t0.9\n\nhouse\tmaison\t0.5\nhouse\tlogis\t0.5\n")
    assert read_lexicon(lex) == {"zebra": "zèbre", "house": "maison"}  # ties: the first
    for body, message in (("a\tb\t0.5\na\tb\n", "lex.tsv:2: expected source_word<TAB>target_word"),
                          ("a b\tc\t0.5\n", "lex.tsv:1: the source word 'a b'"),
                          ("a\t\t0.5\n", "lex.tsv:1: the target word ''"),
                          ("a\tb\tlikely\n", "lex.tsv:1: probability 'likely' is not a number"),
                          ("a\tb\t1.5\n", "lex.tsv:1: probability 1.5 is outside 0..1"),
                          ("a\tb\tnan\n", "lex.tsv:1: probability nan is outside")):
        lex.write_text(body)
        with pytest.raises(DataError, match=message):
            read_lexicon(lex)
    with pytest.raises(DataError, match="missing.tsv"):
        read_lexicon(tmp_path / "missing.tsv")


def test_replace_unk_on_hand_made_links():
    from rnnsearch.engine.align.links import replace_unk

    source = ["the", "Zebra", "sat", "on", "the", "okapi"]
    links = [(1, 0), (0, 1), (5, 2)]
    words = ["<unk>", "chat", "<unk>"]
    # the table's translation where it has the word, else the source word copied
    assert replace_unk(words, [0, 2], links, source, {"Zebra": "zèbre"}) == ["zèbre", "chat", "okapi"]
    assert replace_unk(words, [0, 2], links, source) == ["Zebra", "chat", "okapi"]
    # looked up as the model reads the word when it is not there as given
    assert replace_unk(words, [0, 2], links, source, {"zebra": "zèbre"}, key=str.lower)[0] == "zèbre"
    assert replace_unk(words, [], links, source, {"Zebra": "zèbre"}) == words  # no unknown word


def test_translation_replace_unk_of_a_sentencepiece_model():
    from rnnsearch.engine.decode.translator import Translation

    # "le ⁇ chat": the ⁇ (pieces ▁ and <unk>) attends to "zebra"
    rows = [[1, 0, 0], [0, 1, 0], [0, 1, 0], [0, 0, 1], [0, 0, 1], [1, 0, 0]]
    t = Translation("le  ⁇  chat", ["▁le", "▁", "<unk>", "▁c", "hat"], -1.0, ["▁the", "▁zebra", "▁cat"],
                    [[float(w) for w in r] for r in rows], source="the zebra cat")
    assert t.alignment == [(0, 0), (1, 1), (2, 2)]
    assert t.replace_unk().text == "le zebra chat"
    replaced = t.replace_unk({"zebra": "zèbre"})
    assert replaced.text == "le zèbre chat" and replaced.tokens == t.tokens  # the model's pieces stay
    assert replaced.alignment == t.alignment
    assert _dog().replace_unk({"Hund": "chien"}) == _dog()  # nothing unknown: unchanged


def test_saliency_rows_are_gradient_times_input_of_each_sentence_alone(reverse_model):
    """The batched saliency (one backward per target position over the whole batch) equals
    |∂ log p(y_i) / ∂e_j · e_j| computed for each sentence on its own, normalised per row."""
    import torch
    from conftest import TOY

    from rnnsearch.engine.data.vocab import BOS, EOS
    from rnnsearch.engine.decode.loading import load
    from rnnsearch.tools.toy import toy_pairs

    translator = load(reverse_model, device="cpu")
    model = translator.model.double()  # float64: the two summation orders agree far below the bound
    src, tgt = toy_pairs(5, "reverse", seed=3, **TOY)
    batched = translator.force(src, tgt, links="saliency")
    for s, t, rows in zip(src, tgt, batched):
        s_ids = torch.tensor([translator.source_ids(s)])
        t_ids = translator.target_ids(t)
        tgt_in = torch.tensor([[BOS, *t_ids]])
        gold = [*t_ids, EOS]
        emb = model.src_emb(s_ids).detach()
        expected = []
        for i, y in enumerate(gold):
            e = emb.clone().requires_grad_(True)
            hook = model.src_emb.register_forward_hook(lambda mod, inp, out, e=e: e)
            try:
                logp = model(s_ids, torch.ones_like(s_ids, dtype=torch.bool), tgt_in)[0]
            finally:
                hook.remove()
            (grad,) = torch.autograd.grad(logp[0, i, y], e)
            row = (grad * e).sum(-1).abs()[0]
            expected.append((row / row.sum()).tolist())
        assert len(rows) == len(gold)
        as64 = lambda x: torch.tensor(x, dtype=torch.float64)  # noqa: E731
        torch.testing.assert_close(as64(rows), as64(expected), atol=1e-5, rtol=0)


def test_align_command_with_saliency_links_the_reversal(reverse_model, tmp_path):
    scores, _ = _align_reversal(reverse_model, tmp_path, 30, "--links", "saliency")
    assert scores["weights"] == "saliency" and scores["sentences"] == 30
    assert scores["aer"] < 0.3, scores
    assert _align_reversal(reverse_model, tmp_path, 30, "--saliency")[0] == scores  # the older spelling
    scores, _ = _align_reversal(reverse_model, tmp_path, 30, "--links", "mean")
    assert scores["weights"] == "attention+saliency" and scores["aer"] < 0.3, scores


def test_saliency_mean_is_the_mean_of_the_attention_and_the_saliency(reverse_model):
    import numpy as np
    from conftest import TOY

    from rnnsearch.engine.decode.loading import load
    from rnnsearch.tools.toy import toy_pairs

    translator = load(reverse_model, device="cpu")
    src, tgt = toy_pairs(6, "reverse", seed=4, **TOY)
    attention, salient = translator.force(src, tgt), translator.force(src, tgt, links="saliency")
    for m, a, s in zip(translator.force(src, tgt, links="mean"), attention, salient):
        np.testing.assert_allclose(np.array(m), (np.array(a) + np.array(s)) / 2, atol=1e-6)
        assert not np.allclose(np.array(a), np.array(s))  # two opinions, not one
    with pytest.raises(ConfigError, match=r"links: expected 'attention' \| 'head'"):
        translator.force(src, tgt, links="median")
    with pytest.raises(ConfigError, match="links: 'head' reads the alignment head, and .* has none"):
        translator.force(src, tgt, links="head")
