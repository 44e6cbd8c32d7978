"""`rnnsearch evaluate` (sacrebleu, by length, several systems) and `plot-attention`."""

import json
import subprocess
import sys

import pytest
from conftest import TOY

from rnnsearch.engine.alignment import merge_subwords
from rnnsearch.engine.evaluate import bleu_by_length, score_corpus
from rnnsearch.tools.toy import toy_pairs


def test_bleu_by_length_buckets():
    src = ["a " * 5, "a " * 15, "a " * 25, "a " * 70]
    hyp = ["the cat sat on the mat today"] * 4
    ref = ["the cat sat on the mat today", "the cat sat on the mat today", "a dog", "the cat sat on the mat"]
    rows = bleu_by_length(src, hyp, ref, edges=(10, 20, 30, 60))
    assert [r["bucket"] for r in rows] == ["0-10", "10-20", "20-30", "30-60", "60+"]
    assert [r["sentences"] for r in rows] == [1, 1, 1, 0, 1]
    assert rows[0]["bleu"] == 100.0 and rows[2]["bleu"] == 0.0 and rows[3]["bleu"] is None
    assert 0 < rows[4]["bleu"] < 100


def test_score_corpus_signature_and_values():
    r = score_corpus(["the cat sat on the mat ."], ["the cat sat on the mat ."])
    assert r["bleu"] == 100.0 and r["chrf"] == 100.0
    assert r["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")


def test_merge_subwords_sums_source_and_averages_target():
    w = [[0.5, 0.3, 0.2], [0.1, 0.1, 0.8], [0.3, 0.3, 0.4], [0.2, 0.2, 0.6]]
    merged, src, tgt = merge_subwords(w, ["▁Ein", "▁Hu", "nd"], ["▁A", "▁do", "g", "</s>"])
    assert src == ["Ein", "Hund"] and tgt == ["A", "dog", "</s>"]
    assert merged[0] == pytest.approx([0.5, 0.5])
    assert merged[1] == pytest.approx([0.2, 0.8])  # mean of ▁do and g, summed over ▁Hu nd
    assert all(sum(r) == pytest.approx(1.0) for r in merged)


def test_merge_keeps_pieces_of_unsegmented_chinese():
    """Chinese has no spaces: '▁' marks only the sentence start, so each piece stays a unit
    (merging to whitespace words would make the whole sentence one row)."""
    target = ["▁我", "昨天", "吃了", "一个", "苹果", "。", "</s>"]
    w = [[0.9, 0.1]] * len(target)
    merged, src, tgt = merge_subwords(w, ["▁I", "▁ate"], target)
    assert tgt == ["我", "昨天", "吃了", "一个", "苹果", "。", "</s>"] and len(merged) == 7
    _, _, mixed = merge_subwords(w[:5], ["▁I", "▁ate"], ["▁iPh", "one", "▁手机", "很", "</s>"])
    assert mixed == ["iPhone", "手机", "很", "</s>"]  # spaced words still merge


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "rnnsearch", *args], capture_output=True, text=True,
                          timeout=120)


def test_evaluate_command_by_length_two_systems(reverse_model, tmp_path):
    src, ref = toy_pairs(60, "reverse", seed=7, **TOY)
    (tmp_path / "src").write_text("\n".join(src) + "\n")
    (tmp_path / "ref").write_text("\n".join(ref) + "\n")
    (tmp_path / "copy").write_text("\n".join(src) + "\n")  # a bad system: copies the source
    res = run_cli("evaluate", "--model", str(reverse_model), "--hyp", str(tmp_path / "copy"), "--src",
                  str(tmp_path / "src"), "--ref", str(tmp_path / "ref"), "--by-length", "--buckets", "4,6",
                  "--out", str(tmp_path / "out"), "--label", "rnnsearch", "--label", "copy", "--beam", "3")
    assert res.returncode == 0, res.stderr
    systems = json.loads(res.stdout)["systems"]
    assert [s["label"] for s in systems] == ["rnnsearch", "copy"]
    assert systems[0]["bleu"] > 80 > systems[1]["bleu"]
    assert systems[0]["sentences_no_unk"] == 60  # a word vocabulary: the No-UNK subset is reported
    assert [b["bucket"] for b in systems[0]["by_length"]] == ["0-4", "4-6", "6+"]
    for name in ("by_length.csv", "by_length.json", "by_length.png"):
        assert (tmp_path / "out" / name).exists()
    assert (tmp_path / "out" / "by_length.csv").read_text().splitlines()[0] == "system,bucket,sentences,bleu"


def test_plot_attention_command(reverse_model, tmp_path):
    (tmp_path / "in").write_text("w1 w2 w3\n\nw4 w5 w6 w7\n")
    res = run_cli("plot-attention", "--model", str(reverse_model), "--input", str(tmp_path / "in"),
                  "--out", str(tmp_path / "att.svg"), "--lines", "1,3")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "att-1.svg").exists() and (tmp_path / "att-3.svg").exists()
    res = run_cli("plot-attention", "--model", str(reverse_model), "--input", str(tmp_path / "in"),
                  "--out", str(tmp_path / "x.png"), "--lines", "9")
    assert res.returncode == 2 and "--lines 9 is outside 1..3" in res.stderr
