"""`rnnsearch evaluate` (sacrebleu, by length, several systems) and `plot-attention`."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TOY

from rnnsearch.engine.align.links import merge_subwords
from rnnsearch.engine.decode.evaluate import bleu_by_length, score_corpus
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


# -- evaluate --no-unk: the paper's Table 1 "No UNK" column ----------------------------------------

SRC = ["the cat sat on the mat",  # every word known on both sides
       "the dog sat on the mat",  # "dog" is not in the source vocabulary
       "The cat sat on a mat",  # "The" is known only to a model that lower-cases
       "a cat sat on the mat"]  # its reference has "paillasson", not in the target vocabulary
REF = ["le chat était assis sur le tapis", "le chien était assis sur le tapis",
       "le chat était assis sur un tapis", "un chat était assis sur le paillasson"]


def word_model(tmp_path: Path, lowercase: bool = False) -> Path:
    """A random tiny model with hand-made word vocabularies (no training: its translations are
    noise, which is all a scoring test needs)."""
    import torch

    from rnnsearch.config import config_from_dict
    from rnnsearch.engine.checkpoint import save_weights
    from rnnsearch.engine.data.vocab import WordVocab, save_tokenizers
    from rnnsearch.nn.model import build_model

    cfg = config_from_dict({"preset": "tiny", "data": {"lowercase": lowercase}, "vocab": {"kind": "word"},
                            "model": {"emb": 8, "hidden": 8, "align": 8, "maxout": 4}})
    model_dir = tmp_path / ("lower" if lowercase else "cased")
    model_dir.mkdir()
    src = WordVocab("the cat sat on a mat".split())
    tgt = WordVocab("le chat était assis sur un tapis".split())
    save_tokenizers(model_dir, cfg.vocab, src, tgt)
    torch.manual_seed(0)
    save_weights(model_dir / "model.safetensors", build_model(cfg.model, len(src), len(tgt)))
    cfg.save(model_dir / "config.json")
    return model_dir


def test_no_unk_scores_only_sentences_without_unknown_words(tmp_path, capsys):
    from rnnsearch.cli import main

    for name, lines in (("src", SRC), ("ref", REF), ("hyp", [REF[0], "x y z", REF[2], "x y z"])):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    files = ["--src", str(tmp_path / "src"), "--ref", str(tmp_path / "ref"), "--beam", "2"]
    hyp = ["--hyp", str(tmp_path / "hyp")]
    # the hypothesis file is right exactly on the sentences without unknown words: 100 on those alone
    for lowercase, kept in ((False, [0]), (True, [0, 2])):
        model = word_model(tmp_path, lowercase)
        assert main(["evaluate", "--model", str(model), *hyp, *files, "--no-unk"]) == 0
        out = capsys.readouterr()
        systems = json.loads(out.out)["systems"]
        assert f"--no-unk: {len(kept)} of 4 sentences have no unknown word" in out.err
        for entry in systems:
            assert entry["no_unk"] is True and entry["sentences_total"] == 4
            assert entry["sentences"] == len(kept)
            assert "bleu_no_unk" not in entry
        assert systems[1]["bleu"] == 100.0 and systems[1]["chrf"] == 100.0
    # the model's own BLEU is computed on those sentences' translations only
    assert main(["evaluate", "--model", str(model), *files, "--no-unk", "--output", str(tmp_path / "out")]) \
        == 0
    entry = json.loads(capsys.readouterr().out)
    hyps = (tmp_path / "out").read_text().splitlines()
    assert len(hyps) == 4  # every sentence is translated; two are scored
    assert entry["bleu"] == score_corpus([hyps[0], hyps[2]], [REF[0], REF[2]])["bleu"]
    assert entry["chrf"] == score_corpus([hyps[0], hyps[2]], [REF[0], REF[2]])["chrf"]
    # without --no-unk: every sentence scored, the No-UNK figures beside (a word vocabulary)
    assert main(["evaluate", "--model", str(model), *hyp, *files]) == 0
    systems = json.loads(capsys.readouterr().out)["systems"]
    assert systems[1]["sentences"] == 4 and systems[1]["bleu"] < 100 and "no_unk" not in systems[1]
    assert systems[0]["sentences_no_unk"] == 2
    assert main(["evaluate", *hyp, *files, "--no-unk"]) == 2
    assert "--no-unk needs a --model" in capsys.readouterr().err


def test_no_unk_subset_with_sentencepiece_pieces():
    from rnnsearch.engine.data.vocab import SentencePiece
    from rnnsearch.engine.decode.evaluate import no_unk_subset

    texts = ["the cat sat on the mat", "a dog ate the bone", "le chat est assis"] * 30
    sp = SentencePiece.build(texts, 40)
    sources, refs = ["the cat", "the zebra", "the mat"], ["le chat", "le chat", "le ж"]
    assert no_unk_subset(sources, refs, sp.encode, sp.encode) == [0]  # z, b: no piece; ж neither
    with_bytes = SentencePiece.build(texts, 300, byte_fallback=True)  # unknown characters become bytes
    assert no_unk_subset(sources, refs, with_bytes.encode, with_bytes.encode) == [0, 1, 2]


# -- TER, and paired significance tests between systems (sacrebleu's) ------------------------------

def test_score_corpus_gives_ter_with_its_signature():
    r = score_corpus(["the cat sat on the mat ."], ["the cat sat on the mat ."])
    assert r["ter"] == 0.0 and r["ter_signature"].startswith("nrefs:1|case:lc|tok:tercom")
    r = score_corpus(["the cat sat on a mat ."], ["the cat sat on the mat ."])
    assert r["ter"] == pytest.approx(100 / 7, abs=0.01)  # one substitution in seven words; lower is better
    assert score_corpus([], []) == {"bleu": None, "chrf": None, "ter": None}


def write_systems(tmp_path: Path) -> list[str]:
    """40 toy references, a good system (one word in eight wrong), a poor one (every other word
    wrong), and a copy of the poor one; the evaluate flags scoring them."""
    import random

    rng = random.Random(3)
    _, ref = toy_pairs(40, "reverse", seed=5, **TOY)

    def noisy(share: float) -> list[str]:
        return [" ".join("zz" if rng.random() < share else w for w in line.split()) for line in ref]

    poor = noisy(0.5)
    for name, lines in (("src", ref), ("ref", ref), ("good", noisy(0.125)), ("poor", poor), ("same", poor)):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    return ["--src", str(tmp_path / "src"), "--ref", str(tmp_path / "ref")]


def evaluate_json(capsys, *argv: str) -> dict:
    from rnnsearch.cli import main

    assert main(["evaluate", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_significance_of_a_clearly_better_system_and_of_an_identical_one(tmp_path, capsys):
    files = write_systems(tmp_path)
    hyp = {name: ["--hyp", str(tmp_path / name)] for name in ("good", "poor", "same")}
    out = evaluate_json(capsys, *files, *hyp["poor"], *hyp["good"], *hyp["same"])
    assert [s["label"] for s in out["systems"]] == ["poor", "good", "same"]
    assert all(s["ter"] is not None and s["ter_signature"] for s in out["systems"])
    sig = out["significance"]
    assert [sig[k] for k in ("baseline", "seed", "paired_bs_n", "paired_ar_n")] == ["poor", 12345, 1000,
                                                                                  10000]
    assert sig["bleu_signature"].startswith("nrefs:1|bs:1000|ar:10000|seed:12345|case:mixed")
    assert "tok:tercom" in sig["ter_signature"] and "nc:6" in sig["chrf_signature"]
    poor, good, same = sig["systems"]
    assert "p_bs" not in poor["bleu"] and poor["bleu"]["ci"] > 0  # the baseline: its score and interval
    for metric in ("bleu", "chrf", "ter"):
        cell = good[metric]
        assert cell["score"] == out["systems"][1][metric]  # the same scores as the table above
        assert abs(cell["mean"] - cell["score"]) <= cell["ci"]
        assert cell["p_bs"] < 0.05 and cell["p_ar"] < 0.05 and cell["significant"] is True
        assert same[metric]["p_bs"] == same[metric]["p_ar"] == 1.0 and same[metric]["significant"] is False
    assert good["ter"]["score"] < poor["ter"]["score"] and good["bleu"]["score"] > poor["bleu"]["score"]
    assert same["identical"] is True and "identical" not in good  # sacrebleu alone: p = 1/(n+1) there


def test_significance_is_reproducible_by_its_seed(tmp_path, capsys):
    files = write_systems(tmp_path)
    argv = [*files, "--hyp", str(tmp_path / "poor"), "--hyp", str(tmp_path / "good"),
            "--paired-bs-n", "300", "--paired-ar-n", "500"]
    first, again = evaluate_json(capsys, *argv), evaluate_json(capsys, *argv)
    assert first == again
    seeded = evaluate_json(capsys, *argv, "--seed", "7")["significance"]
    assert seeded["seed"] == 7 and "|bs:300|ar:500|seed:7|" in seeded["bleu_signature"]
    assert seeded == evaluate_json(capsys, *argv, "--seed", "7")["significance"]
    assert seeded["systems"] != first["significance"]["systems"]  # other resamples: other intervals


def test_evaluate_errors_are_one_clear_line(tmp_path, capsys):
    from rnnsearch.cli import main

    files = write_systems(tmp_path)
    (tmp_path / "short").write_text("a b c\n" * 39)
    short, ref = tmp_path / "short", tmp_path / "ref"
    cases = [(["--hyp", str(tmp_path / "good"), "--hyp", str(short)],
              f"{short} (39 lines) and {ref} (40 lines) have different line counts"),
             (["--hyp", str(tmp_path / "good"), "--seed", "3"],
              "--seed sets the paired significance tests, which compare systems: give two or more "
              "--model/--hyp (got one)"),
             (["--hyp", str(tmp_path / "good"), "--paired-bs-n", "9", "--paired-ar-n", "9"],
              "--paired-bs-n, --paired-ar-n set the paired significance tests"),
             (["--hyp", str(tmp_path / "good"), "--hyp", str(tmp_path / "poor"), "--seed", "0"],
              "--seed 0: give 1 or more (sacrebleu takes 0 for unseeded)"),
             (["--hyp", str(tmp_path / "good"), "--hyp", str(tmp_path / "poor"), "--paired-ar-n", "0"],
              "--paired-ar-n 0: give 1 or more")]
    for argv, message in cases:
        assert main(["evaluate", *files, *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
