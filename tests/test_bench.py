"""benchmarks/: the FLOP count behind `mfu`, and the anchors' log formats the side-by-side run reads."""

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch
from conftest import TOY, random_batch
from test_model import teacher_inputs
from torch.utils.flop_counter import FlopCounterMode

from benchmarks import anchors, bench, common, curve, europarl_20k, hansards_aer
from rnnsearch.config import ModelConfig, config_from_dict, merge_dicts
from rnnsearch.nn.model import build_model
from rnnsearch.tools.experiments import run_experiments
from rnnsearch.tools.toy import toy_pairs

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("arch", ["rnnsearch", "rnnencdec"])
def test_flop_formula_counts_what_the_model_multiplies(arch):
    cfg = ModelConfig(arch=arch, emb=8, hidden=6, align=7, maxout=5)
    model = build_model(cfg, 17, 19)
    B, S, T = 3, 5, 4  # no padding: every sentence has S source and T target tokens
    src, mask = random_batch([S] * B)
    with FlopCounterMode(display=False) as counter:
        model(src, mask, teacher_inputs(B, T), log_probs=False)
    per_token = bench.flops_per_target_token(cfg, 19, src_per_tgt=S / T, src_len=S)["forward_mflop"] * 1e6
    # the formula leaves out what is done once per sentence: W_s (RNNsearch); V, V_s, C c and C_o c
    # (RNNencdec)
    n, maxout = cfg.hidden, cfg.maxout
    once = 2 * B * (n * n if arch == "rnnsearch" else 2 * n * n + 3 * n * n + n * 2 * maxout)
    assert counter.get_total_flops() == pytest.approx(per_token * B * T + once, rel=1e-9)


def test_opennmt_log_lines_are_read():
    log = ("[2026-11-30 10:00:36,909 INFO] Step 20/  200; acc: 12.6; ppl: 1019.7; xent: 6.9; lr: 0.00100; "
           "sents:    1280; bsz:  867/ 919/64; 665/705 tok/s;     26 sec;\n"
           "[2026-11-30 10:00:45,859 INFO] Step 40/  200; acc: 19.7; ppl: 225.5; xent: 5.4; lr: 0.00100; "
           "sents:    1280; bsz:  813/ 835/64; 1816/1866 tok/s;     35 sec;\n"
           "[2026-11-30 09:34:17,402 INFO] Total translation time (s): 0.3\n"
           "[2026-11-30 09:34:17,402 INFO] Average translation time (ms): 3.4\n")
    assert anchors.opennmt_rates(log) == [705.0, 1866.0]  # target, not source, tokens
    assert anchors.opennmt_seconds(log, 1000) == pytest.approx(3.4)


def test_joeynmt_log_lines_are_read():
    log = ("2026-11-30 10:02:34,430 - INFO - joeynmt.training - Epoch   1, Step:       20, "
           "Batch Loss:     5.905262, Batch Acc: 0.076633, Tokens per Sec:     1093, Lr: 0.001000\n"
           "2026-11-30 09:34:21,487 - INFO - joeynmt.prediction - Generation took 0.5150[sec].\n"
           "2026-11-30 09:34:36,903 - INFO - joeynmt.prediction - Generation took 1.7146[sec].\n")
    assert anchors.joeynmt_rates(log) == [1093.0]
    assert anchors.joeynmt_seconds(log) == pytest.approx(1.7146)  # the last set decoded: test


def test_steady_rate_skips_the_start_and_takes_the_median():
    assert anchors.steady([100, 200, 1000, 1010, 990, 5000, 1005]) == 1005
    assert anchors.steady([300, 900]) == 600  # too few windows to skip any
    with pytest.raises(RuntimeError, match="no throughput"):
        anchors.steady([])


def test_a_childs_peak_memory_is_its_own_not_the_parents(tmp_path):
    """anchors.run reads the child's own high-water mark while it runs: a child that holds 200 MB
    reads about that, and one that holds little reads little even though this process has just
    held 600 MB (which wait4's ru_maxrss can carry into a child across fork and exec)."""
    hold = ("import sys, time; b = bytearray(int(sys.argv[1]) << 20); b[::4096] = b'x' * len(b[::4096]); "
            "time.sleep(0.4)")
    big = anchors.run([sys.executable, "-c", hold, "200"], tmp_path / "big.log")
    assert 200 < big.peak_rss_mb < 400
    ballast = bytearray(600 << 20)
    ballast[::4096] = b"x" * len(ballast[::4096])  # resident in this process
    del ballast
    small = anchors.run([sys.executable, "-c", hold, "1"], tmp_path / "small.log")
    assert small.peak_rss_mb < 100


def test_anchor_flops_grow_with_the_decoder_and_the_vocabulary():
    base = anchors.anchor_flops_per_target_token(256, 256, 512, 8000, 1.0, 14.0)
    assert anchors.anchor_flops_per_target_token(256, 256, 512, 9000, 1.0, 14.0) - base == 3 * 2 * 512 * 1000
    # the anchors' 512-wide input-feeding decoder costs more per token than RNNsearch at the benchmark sizes
    ours = bench.flops_per_target_token(ModelConfig(emb=256, hidden=256, align=256, maxout=512),
                                        8000, 1.0, 14.0)
    assert base > ours["train_mflop"] * 1e6
    assert torch.get_num_threads() >= 1


def test_quick_reads_the_corpus_it_is_given_and_refuses_a_missing_one(tmp_path):
    for split, n in (("train", 3), ("test_2016_flickr", 2)):
        for lang in ("de", "en"):
            (tmp_path / f"{split}.{lang}").write_text("".join(f"{lang} {split} {i}\n" for i in range(n)))
    name, (train_src, train_tgt), (test_src, _) = bench.load_corpus(tmp_path)
    assert name == "multi30k de-en" and train_src[2] == "de train 2" and train_tgt[0] == "en train 0"
    assert test_src == ["de test_2016_flickr 0", "de test_2016_flickr 1"]
    # a corpus asked for by name never silently becomes the built-in one (a mis-carried copy on a device)
    with pytest.raises(SystemExit, match="has no train.de"):
        bench.load_corpus(tmp_path / "missing")


def test_time_to_bleu_keeps_the_checkpoint_each_point_had_and_interpolates():
    points = [2.0, 5.0]
    with tempfile.TemporaryDirectory() as tmp:
        start = time.time() - 600  # the run started ten minutes ago
        files = []
        for name, minute in (("a", 0.5), ("b", 1.9), ("c", 2.1), ("d", 4.0), ("e", 6.0)):
            f = Path(tmp) / name
            f.write_text(name)
            os.utime(f, (start + minute * 60, start + minute * 60))
            files.append(f)
        curve.prune(files, start, points)
        # the newest written by each point survives; the one past the last point goes
        assert sorted(f.name for f in files if f.exists()) == ["b", "d"]
        picks = curve.pick(files, start, points)
        assert [(p, c.name) for p, c, _ in picks] == [(2.0, "b"), (5.0, "d")]
        assert picks[0][2] == pytest.approx(1.9)
    # linear from (0, 0) and between points; None if never reached
    assert curve.minutes_to(30.0, [[2, 15.0], [5, 35.0]]) == pytest.approx(2 + 15 / 20 * 3)
    assert curve.minutes_to(30.0, [[2, 40.0]]) == pytest.approx(1.5)
    assert curve.minutes_to(30.0, [[2, 10.0], [5, None], [10, 20.0]]) is None
    assert curve.system_options("opennmt@lr0.002") == ("opennmt", {"lr": 0.002})
    assert curve.system_options("rnnsearch") == ("rnnsearch", {})
    assert curve.system_options("opennmt@lr0.002@drop0.3") == ("opennmt", {"lr": 0.002, "dropout": 0.3})
    with pytest.raises(ValueError, match="unknown option @drop0.3"):
        curve.system_options("rnnsearch@drop0.3")  # rnnsearch's dropout is its config's


def test_side_by_side_int8_decodes_the_fp32_systems_model():
    # int8 trains nothing: it decodes the fp32 system's model, which the run must train
    assert bench.VARIANTS["rnnsearch-int8"]["model_of"] == "rnnsearch"
    assert bench.VARIANTS["rnnsearch-int8-shortlist"] == {"model_of": "rnnsearch", "decode": "fp32",
                                                         "quantize": "int8", "shortlist": "auto"}
    assert "model_of" not in bench.VARIANTS["rnnsearch"]
    assert {v["quantize"] for v in bench.VARIANTS.values()} == {"none", "int8"}
    # and OpenNMT-py decodes its own fp32 model with its -int8, so that int8 meets int8
    assert bench.ANCHOR_VARIANTS["opennmt-int8"] == {"model_of": "opennmt", "flags": ("-precision", "int8"),
                                                     "quantize": "int8"}
    # --anchors: an anchor left out takes its variants with it
    assert bench.anchor_systems(["opennmt"]) == (["opennmt"], ["opennmt", "opennmt-int8"])
    assert bench.anchor_systems(["joeynmt"]) == (["joeynmt"], ["joeynmt"])
    assert bench.anchor_systems(bench.DEFAULT_ANCHORS)[1] == ["opennmt", "joeynmt", "opennmt-int8"]


def test_side_by_side_times_each_batch_size_and_takes_each_systems_fastest(tmp_path):
    """--decode-batches: every system decodes at every size in every round; its speed in a round is
    its fastest size's, and its BLEU comes from the first size's translations."""
    sbs = object.__new__(bench.SideBySide)
    sbs.args = argparse.Namespace(decode_rounds=2)
    sbs.decoders, sbs.batches, sbs.n_test, sbs.work = ["rnnsearch", "opennmt"], [64, 128], 100, tmp_path
    sbs.failed, sbs.anchor_variants, sbs.anchor_names = {}, {}, ["opennmt"]
    sbs.decoding = {name: {(b, n): [] for b in (1, 5) for n in sbs.batches} for name in sbs.decoders}
    sbs.outputs = {}
    seconds = {("rnnsearch", 64): [1.0, 2.0], ("rnnsearch", 128): [2.0, 1.0],
               ("opennmt", 64): [4.0, 4.0], ("opennmt", 128): [5.0, 5.0]}
    calls = []

    def translate(name, beam, batch, out):
        calls.append((name, beam, batch))
        rounds_done = sum(1 for c in calls if c == (name, beam, batch)) - 1
        return {"seconds": seconds[name, batch][rounds_done] * beam, "output": str(out)}

    sbs.translate = translate
    sbs.decode_rounds()
    assert len(calls) == 2 * 2 * 2 * 2  # rounds x beams x batch sizes x systems
    assert sbs.speeds("rnnsearch", 1) == [100.0, 100.0]  # round 1 at 64, round 2 at 128
    assert sbs.speeds("rnnsearch", 1, 128) == [50.0, 100.0] and sbs.speeds("opennmt", 5) == [5.0, 5.0]
    assert all(".batch64." in str(path) for path in sbs.outputs.values())
    sbs.ours, sbs.anchors, sbs.training = ["rnnsearch"], ["opennmt"], {}
    fastest = sbs.ratios({})["fastest/fastest"]
    assert fastest == {"greedy_sent_per_s": [4.0, 4.0], "beam5_sent_per_s": [4.0, 4.0]}


def test_ab_decodes_with_each_tree_in_its_own_process_and_compares_the_outputs(reverse_model, tmp_path):
    src = tmp_path / "src.txt"
    src.write_text("".join(s + "\n" for s in toy_pairs(8, "reverse", seed=5, **TOY)[0]))
    out = subprocess.run([sys.executable, "-m", "benchmarks.ab", "--before", "src", "--after",
                          str(ROOT / "src"), "--model", str(reverse_model), "--src", str(src),
                          "--rounds", "2", "--threads", "1"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    for beam in ("beam1", "beam5"):
        row = result[beam]
        assert len(row["before"]["rounds"]) == len(row["after"]["rounds"]) == 2
        assert row["ratio"] == pytest.approx(row["after"]["median"] / row["before"]["median"], abs=1e-3)
        assert row["identical_translations"] is True  # the same tree twice
    bad = subprocess.run([sys.executable, "-m", "benchmarks.ab", "--before", str(tmp_path), "--after", "src",
                          "--model", str(tmp_path / "none"), "--src", str(src), "--rounds", "1"],
                         cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode != 0 and "ab: decoding with" in bad.stderr


def test_opennmt_config_takes_a_dropout(tmp_path):
    sizes = dict(common.SIZES)
    plain = json.loads(anchors.opennmt_config(tmp_path / "a", tmp_path, 10, sizes).read_text())
    dropped_path = anchors.opennmt_config(tmp_path / "b", tmp_path, 10, {**sizes, "dropout": 0.3})
    dropped = json.loads(dropped_path.read_text())
    assert plain["dropout"] == [0.0] and dropped["dropout"] == [0.3]


def test_hansards_attention_aer_scores_every_setting_and_chooses_on_trial(reverse_model, tmp_path):
    # the toy model reverses its input, and so does "the other direction": the gold links are the
    # anti-diagonal, which its attention finds
    pairs = {"trial": ["w1 w2 w3", "w4 w5 w6 w7"], "test": ["w2 w4 w6", "w7 w3 w5 w1 w8"]}
    gold = tmp_path / "data" / "hansards_naacl2003_align_gold"
    gold.mkdir(parents=True)
    paths = {}
    for split, sources in pairs.items():
        targets = [" ".join(reversed(s.split())) for s in sources]
        for lang, lines in (("fr", sources), ("en", targets)):
            paths[f"{split}.{lang}"] = str(tmp_path / f"{split}.{lang}")
            Path(paths[f"{split}.{lang}"]).write_text("\n".join(lines) + "\n")
        links = [f"{k} {j + 1} {len(s.split()) - j} S" for k, s in enumerate(sources, 1)
                 for j in range(len(s.split()))]
        (gold / f"{split}.wa.nonullalign").write_text("\n".join(links) + "\n")
    out = hansards_aer.attention_aer(reverse_model, paths, tmp_path / "data", reverse=reverse_model)
    settings = [k for k in out if k.startswith("test/")]
    assert len(settings) == 5 * 2 * 6  # argmax + 4 thresholds, 2 shifts, alone, reverse + 4 symmetrisations
    assert out["test/argmax/shift0/soft"]["aer"] < 0.2
    assert out["test/argmax/shift0/reverse"]["aer"] < 0.2  # the other direction alone, links flipped
    assert out["test/argmax/shift0"]["aer"] < 0.2 and out["test/argmax/shift0"]["sentences"] == 2
    assert out["test/argmax/shift0/intersection"]["precision"] >= out["test/argmax/shift0"]["precision"]
    assert out["test/argmax/shift1"]["aer"] > out["test/argmax/shift0"]["aer"]  # α_i is the right row here
    assert out["test_with_trial_choice"] == out["test/" + out["chosen_on_trial"]]
    assert "shift0" in out["chosen_on_trial"]


def test_hansards_aer_scores_saliency_and_snapshot_weights_beside_the_attention(reverse_model, tmp_path):
    import shutil

    from rnnsearch.engine.checkpoint import save_weights
    from rnnsearch.engine.decode.loading import load

    model = tmp_path / "model"
    shutil.copytree(reverse_model, model)
    paths, sources = {}, ["w1 w2 w3", "w4 w5 w6 w7", "w2 w8 w3 w5"]
    gold = tmp_path / "data" / "hansards_naacl2003_align_gold"
    gold.mkdir(parents=True)
    for split in ("trial", "test"):
        for lang, lines in (("fr", sources), ("en", [" ".join(reversed(s.split())) for s in sources])):
            paths[f"{split}.{lang}"] = str(tmp_path / f"{split}.{lang}")
            Path(paths[f"{split}.{lang}"]).write_text("\n".join(lines) + "\n")
        links = [f"{k} {j + 1} {len(s.split()) - j} S" for k, s in enumerate(sources, 1)
                 for j in range(len(s.split()))]
        (gold / f"{split}.wa.nonullalign").write_text("\n".join(links) + "\n")
    with pytest.raises(SystemExit, match="no snapshots"):
        hansards_aer.attention_aer(model, paths, tmp_path / "data", kinds=("snapshot-mean",))
    net = load(model, device="cpu").model
    for step in (1, 2):  # two snapshots of the very weights: their mean and average are the model
        save_weights(model / "checkpoints" / f"step-{step:08d}.safetensors", net)
    out = hansards_aer.attention_aer(model, paths, tmp_path / "data", kinds=hansards_aer.WEIGHTS)
    assert len([k for k in out if k.startswith("test/")]) == len(hansards_aer.WEIGHTS) * 5 * 2
    for kind in ("snapshot-mean", "averaged"):
        assert out[f"test/{kind}:argmax/shift0"]["aer"] == out["test/argmax/shift0"]["aer"]
        assert out[f"test/{kind}:threshold@0.2/shift1"] == out["test/threshold@0.2/shift1"]
    assert out["test/saliency:argmax/shift0"]["aer"] < 0.3  # gradients find the reversal too
    kinds = ("attention", "saliency", "attention+saliency")
    translator = load(model, device="cpu")
    rows = hansards_aer.pair_weights({"fwd": [translator]}, kinds, sources, sources,
                                     paths["test.fr"], paths["test.en"])
    twice = hansards_aer.pair_weights({"fwd": [translator, translator]}, ("attention",), sources, sources,
                                      paths["test.fr"], paths["test.en"])  # an ensemble of one model twice
    assert all(torch.allclose(torch.tensor(a), torch.tensor(b))
               for a, b in zip(twice["attention"]["fwd"], rows["attention"]["fwd"]))
    for p, w in enumerate(rows["attention+saliency"]["fwd"]):  # the mean of the two, cell by cell
        want = (torch.tensor(rows["attention"]["fwd"][p]) + torch.tensor(rows["saliency"]["fwd"][p])) / 2
        assert torch.allclose(torch.tensor(w), want) and w != rows["saliency"]["fwd"][p]
    last = hansards_aer.attention_aer(model, paths, tmp_path / "data", kinds=("averaged",), last=1)
    assert last["test/averaged:argmax/shift1"] == out["test/argmax/shift1"]


def test_quantize_benchmark_compares_every_kind_with_fp32(reverse_model, tmp_path):
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    sources, targets = toy_pairs(12, "reverse", seed=5, **TOY)
    src.write_text("".join(s + "\n" for s in sources))
    ref.write_text("".join(t + "\n" for t in targets))
    # run as the docs run it: a module of the benchmarks package, from the repository root
    out = subprocess.run([sys.executable, "-m", "benchmarks.quantize", "--model", str(reverse_model),
                          "--src", str(src), "--ref", str(ref), "--rounds", "2", "--beams", "1",
                          "--kinds", "bf16", "int8", "--profile", str(tmp_path / "prof.txt")],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    row = json.loads(out.stdout)["beam1"]
    tables = (tmp_path / "prof.txt").read_text()
    assert [line for line in tables.splitlines() if line.startswith("## ")] == [
        "## fp32, beam 1, 12 sentences", "## bf16, beam 1, 12 sentences", "## int8, beam 1, 12 sentences"]
    assert "quantized::linear_dynamic" in tables.split("## int8")[1]
    assert "quantized::" not in tables.split("## bf16")[0]
    assert list(row) == ["fp32", "bf16", "int8"]  # the baseline first, then the kinds asked for
    assert "speedup" not in row["fp32"]
    for kind in ("bf16", "int8"):
        assert row[kind]["speedup"] > 0 and 0 <= row[kind]["identical_translations"] <= 1
        assert row[kind]["bleu_delta"] == pytest.approx(row[kind]["bleu"] - row["fp32"]["bleu"], abs=0.011)


def test_quantize_benchmark_measures_shortlists_and_their_coverage(reverse_model, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(reverse_model, model)  # --shortlist auto writes model/shortlist.npz
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    sources, targets = toy_pairs(12, "reverse", seed=5, **TOY)
    src.write_text("".join(s + "\n" for s in sources))
    ref.write_text("".join(t + "\n" for t in targets))
    out = subprocess.run([sys.executable, "-m", "benchmarks.quantize", "--model", str(model),
                          "--src", str(src), "--ref", str(ref), "--rounds", "1", "--beams", "3",
                          "--kinds", "fp32+shortlist", "int8+shortlist", "--peak-rss"],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert list(result["beam3"]) == ["fp32", "fp32+shortlist", "int8+shortlist"]
    # the reversal's target words are its source words: every one is on its sentence's list
    assert result["shortlist"]["coverage"] == 1.0 and result["shortlist"]["source"] == "cooccurrence"
    row = result["beam3"]
    assert row["fp32+shortlist"]["bleu"] == pytest.approx(row["fp32"]["bleu"], abs=1.0)
    assert (model / "shortlist.npz").exists()
    # --peak-rss: each kind's own decoding process, torch loaded (far above this process's 0)
    assert all(100 < row[kind]["peak_rss_mb"] < 4000 for kind in row)


def test_europarl_sessions_merge_into_the_published_results(tmp_path):
    """benchmarks.europarl_20k: systems scored by a later run join the published ones in the
    experiment's order, with its paths rewritten; another test set is refused."""
    kw = dict(corpus="synthetic", steps=3, train_sentences=150, seed=2, test_sentences=6)
    run_experiments(["reverse"], out_dir=tmp_path / "first", only=["RNNsearch"], **kw)
    run_experiments(["reverse"], out_dir=tmp_path / "later", only=["RNNencdec"], **kw)
    docs = tmp_path / "docs"
    shutil.copytree(tmp_path / "first" / "reverse", europarl_20k.published_dir("reverse", docs))
    later = tmp_path / "later" / "reverse" / "results.json"  # as if scored on another machine
    later.write_text(json.dumps({**json.loads(later.read_text()), "scored_on": "2099-01-01, another CPU"}))
    summary = europarl_20k.publish(tmp_path / "later", tmp_path / "data", docs)
    assert list(summary) == ["RNNencdec", "RNNsearch", "reverse: not trained"]
    assert summary["reverse: not trained"] == ["RNNencdec reversed", "RNNsearch reversed"]
    published = europarl_20k.published_dir("reverse", docs)
    merged = json.loads((published / "results.json").read_text())
    assert [s["label"] for s in merged["systems"]] == ["RNNencdec", "RNNsearch"]
    assert merged["systems"][0]["model_dir"].startswith("experiments/europarl-it-en/models/rnnencdec-50-")
    table = (published / "results.md").read_text()
    assert "Not trained yet: RNNencdec reversed, RNNsearch reversed." in table
    assert "Scored apart from the others: RNNencdec 2099-01-01, another CPU." in table
    # publishing again adds nothing twice
    europarl_20k.publish(tmp_path / "later", tmp_path / "data", docs)
    assert len(json.loads((published / "results.json").read_text())["systems"]) == 2
    other = {**json.loads((tmp_path / "later" / "reverse" / "results.json").read_text()), "test_sentences": 7}
    with pytest.raises(SystemExit, match="another test set"):
        europarl_20k.merge("reverse", other, merged, lambda text: text)


def test_scale_benchmark_measures_each_size_and_the_paper_model(tmp_path, monkeypatch, capsys):
    """benchmarks.scale end to end on a stand-in corpus of Europarl's layout, 300 and 700 pairs
    (repeated from 250), with the paper's model shrunk by `--set`-like edits: every figure is there
    and plausible, and the corpora are the sizes asked."""
    from benchmarks import scale

    corpus = tmp_path / "europarl"
    corpus.mkdir()
    src, tgt = toy_pairs(250, "reverse", seed=3, **TOY)
    for side, lines in (("it", src), ("en", tgt)):
        with gzip.open(corpus / f"train.{side}.gz", "wt", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    small = {"model": {"emb": 8, "hidden": 8, "align": 8, "maxout": 8}, "vocab": {"size": 60}}
    monkeypatch.setattr(scale, "BENCH_CONFIG", merge_dicts(scale.BENCH_CONFIG, small))
    real_load = scale.load_config
    monkeypatch.setattr(scale, "load_config", lambda path: config_from_dict(merge_dicts(
        real_load(path).to_dict(), {**small, "vocab": {"size": 40}})))
    out = tmp_path / "scale.json"
    scale.main(["--corpus", str(corpus), "--work", str(tmp_path / "work"), "--sizes", "700", "300",
                "--steps", "4", "--paper-steps", "3", "--out", str(out)])
    result = json.loads(out.read_text())
    assert [row["pairs"] for row in result["sizes"]] == [300, 700]
    for row in result["sizes"]:
        assert [p["workers"] for p in row["prepare"]] == [1, 2]
        assert row["prepare"][0]["pairs_kept"] == row["prepare"][1]["pairs_kept"] == row["pairs"]
        assert row["train"]["tok_per_s"] > 0 and row["train"]["peak_rss_anon_mb"] > 50
    assert "train_in_memory" in result["sizes"][0] and "train_in_memory" not in result["sizes"][1]
    lines = (tmp_path / "work" / "corpora" / "700" / "train.en").read_text().splitlines()
    assert len(lines) == 700 and lines[250:500] == tgt
    paper = result["paper_model"]
    assert paper["steps"] == 3 and paper["hours_per_epoch"] > 0 and paper["updates_per_epoch"] == 130909
    assert result["cpu"] and "RssAnon" in result["memory_note"]


def test_the_tagged_hansards_set_tags_sure_linked_runs_and_scores_placement():
    """hansards_aer's tag placement: one <b>…</b> a sentence around 1-3 words that all have a sure
    link, the text itself unchanged; the gold links place every tag right, no links none."""
    from rnnsearch.engine.decode.markup import parse

    sources = ["le chat noir dort .", "a & b", "un mot"]
    references = ["the black cat sleeps .", "a & b", "one word"]
    sure = [{(0, 0), (1, 2), (2, 1), (3, 3)}, {(0, 0), (2, 2)}, set()]
    tagged = hansards_aer.tagged_sources(sources, sure, seed=3)
    for line, source, links in zip(tagged, sources, sure):
        marked = parse(line)
        assert marked.text == source
        assert len(marked.tags) == (1 if links else 0)
        for tag in marked.tags:
            linked = {i for i, _ in links}
            assert tag.last > tag.first and all(i in linked for i in range(tag.first, tag.last))
    assert hansards_aer.tag_placement(sources, sure, references, sure)["accuracy"] == 1.0
    none = hansards_aer.tag_placement(sources, sure, references, [set()] * 3)
    assert none["tags"] == 2 and none["exact"] == 0


def test_tag_accuracy_counts_exact_spans():
    import math

    from rnnsearch.engine.decode.markup import parse, placed_spans

    sources = ["the <b>red</b> house", "<i>a</i> <br>b"]
    references = ["la maison rouge", "A B"]
    gold = [{(0, 0), (1, 2), (2, 1)}, {(0, 0), (1, 1)}]  # the red house -> la maison rouge
    assert hansards_aer.tag_accuracy(sources, gold, references, gold) == {"accuracy": 1.0, "tags": 3,
                                                                          "exact": 3}
    wrong = [{(0, 0), (1, 1), (2, 2)}, {(0, 1), (1, 1)}]  # <b> on "maison"; <i> on B, <br> still before B
    assert hansards_aer.tag_accuracy(sources, gold, references, wrong) == {"accuracy": 1 / 3, "tags": 3,
                                                                           "exact": 1}
    assert placed_spans(parse(sources[1]), 2, wrong[1]) == [(1, 2), (1, 1)]
    assert math.isnan(hansards_aer.tag_accuracy(["x"], [set()], ["y"], [set()])["accuracy"])


def test_decoding_profile_writes_its_table_beside_the_training_one(reverse_model, tmp_path):
    import argparse

    from rnnsearch.engine.decode.loading import load

    translator = load(reverse_model, device="cpu")
    sources, _ = toy_pairs(6, "reverse", seed=2, **TOY)
    args = argparse.Namespace(profile=str(tmp_path / "prof.txt"), decode_batch=4, precision="fp32")
    out = bench.profile_decoding(translator, sources, args, torch.device("cpu"))
    assert out["table"] == str(tmp_path / "prof.beam5.txt") and out["sentences"] == 6
    table = Path(out["table"]).read_text()
    assert "aten::addmm" in table and "Self CPU" in table


# -- Marian (wiring only: nothing here needs pymarian installed) ---------------------------

MARIAN_TRAIN_LOG = """\
[2026-12-07 10:28:33] [memory] Reserving 25 MB, device cpu0
[2026-12-07 10:28:37] Ep. 1 : Up. 20 : Sen. 1,280 : Cost 6.86424208 : Time 5.51s : 701.47 words/s : \
gNorm 0.6165
[2026-12-07 10:28:37] Seen 400 samples
[2026-12-07 10:28:42] Ep. 4 : Up. 40 : Sen. 1,280 : Cost 5.97313261 : Time 5.04s : 1767.71 words/s : \
gNorm 1.2967
[2026-12-07 10:28:53] Training finished
"""
MARIAN_DECODE_LOG = """\
[2026-12-07 10:38:17] Loading model from model.npz
[2026-12-07 10:38:17] [memory] Reserving 45 MB, device cpu0
[2026-12-07 10:38:17] Total time: 0.30778s wall
"""
MARIAN_CRASH = """pymarian decode --models model.packed8avx512.bin exited with -6; log x.log:
[2026-12-07 10:38:21] [memory] Memory mapping model parameters in graph
[2026-12-07 10:38:21] Error: Segmentation fault
[2026-12-07 10:38:21] Error: Aborted from setErrorHandlers()::<lambda(int, siginfo_t*, void*)> in \
logging.cpp:141
[0x558f7f37b081]    _start                                             + 0x21
"""


def test_marian_log_lines_are_read():
    assert anchors.marian_rates(MARIAN_TRAIN_LOG) == [701.47, 1767.71]
    assert anchors.marian_seconds(MARIAN_DECODE_LOG) == pytest.approx(0.30778)
    assert anchors.marian_error(MARIAN_CRASH) == ("Segmentation fault; Aborted from setErrorHandlers()::"
                                                  "<lambda(int, siginfo_t*, void*)> in logging.cpp:141")
    said = anchors.marian_error("no marian line", "x exited with 1; log y:\ntail")
    assert said == "x exited with 1; log y:"


def test_a_marian_failure_says_what_marian_said_above_its_call_stack(tmp_path):
    crash = ("import sys; "
             "print('[t] Error: Child 1 has different type (first: float32 != child: packed16)'); "
             "print('[t] Error: Aborted from commonType in node.h:207'); "
             "print('\\n'.join(f'[0x{k:x}] frame' for k in range(40))); sys.exit(134)")
    with pytest.raises(anchors.MarianError) as failed:
        anchors.marian_run([sys.executable, "-c", crash], tmp_path / "decode.log")
    assert str(failed.value) == ("Child 1 has different type (first: float32 != child: packed16); "
                                 "Aborted from commonType in node.h:207")
    with pytest.raises(anchors.MarianError, match="exited with 3"):  # said nothing: the exit status
        anchors.marian_run([sys.executable, "-c", "raise SystemExit(3)"], tmp_path / "quiet.log")
    assert anchors.marian_run([sys.executable, "-c", "print('ok')"], tmp_path / "ok.log").output == "ok\n"


def test_marian_command_lines_give_the_benchmark_model(tmp_path):
    python = tmp_path / "venv" / "bin" / "python"
    cmd = anchors.marian_train_command(python, tmp_path / "w", tmp_path / "d", 900, dict(common.SIZES), 2)
    assert cmd[:2] == [str(tmp_path / "venv" / "bin" / "pymarian"), "train"]
    opts = dict(zip(cmd[2::1], cmd[3::1]))  # each option's next word
    assert {k: opts[k] for k in ("--type", "--dim-emb", "--dim-rnn", "--enc-type", "--dec-cell-base-depth",
                                 "--mini-batch", "--learn-rate", "--clip-norm", "--cost-type", "--after",
                                 "--cpu-threads", "--save-freq", "--dropout-rnn")} == {
        "--type": "s2s", "--dim-emb": "256", "--dim-rnn": "256", "--enc-type": "bidirectional",
        "--dec-cell-base-depth": "2", "--mini-batch": "64", "--learn-rate": "0.001", "--clip-norm": "1",
        "--cost-type": "ce-mean-words", "--after": "900u", "--cpu-threads": "2", "--save-freq": "900u",
        "--dropout-rnn": "0"}
    assert "--mini-batch-fit" not in cmd and "--tied-embeddings" not in cmd
    assert cmd[cmd.index("--train-sets") + 1:][:2] == [str(tmp_path / "d" / "train.src"),
                                                     str(tmp_path / "d" / "train.tgt")]
    sizes = {**common.SIZES, "save": 25, "lr": 2e-3}
    saving = anchors.marian_train_command(python, tmp_path, tmp_path, 10, sizes, 1)
    assert saving[saving.index("--save-freq") + 1] == "25u"
    assert saving[saving.index("--learn-rate") + 1] == "0.002"
    args = (python, "m.npz", ["s.yml", "t.yml"], tmp_path / "test.src", tmp_path / "out", 5, 128, 2)
    plain, online = anchors.marian_decode_command(*args), anchors.marian_decode_command(*args, "packed8")
    assert plain[1] == "decode" and "--gemm-type" not in plain and "--optimize" not in plain
    assert plain[plain.index("--beam-size") + 1] == "5" and plain[plain.index("--mini-batch") + 1] == "128"
    assert plain[plain.index("--vocabs") + 1:][:2] == ["s.yml", "t.yml"]
    assert online[-3:] == ["--optimize", "--gemm-type", "packed8"]


def test_marian_gemm_types_follow_the_cpu_and_its_venv_has_no_torch(tmp_path, monkeypatch):
    avx2 = anchors.marian_variants({"sse2", "ssse3", "avx2"})
    assert "marian-conv-packed8avx512" not in avx2 and "marian-packed8" in avx2
    assert avx2["marian-conv-intgemm8"] == {"model_of": "marian", "gemm": "intgemm8", "convert": True,
                                            "quantize": "int8"}
    assert set(anchors.marian_variants({"sse2", "ssse3", "avx2", "avx512f"})) == set(anchors.MARIAN_GEMMS)
    assert anchors.marian_variants(set()) == {}
    trained, decoded = bench.anchor_systems(["marian", "opennmt"], bench.anchor_variants({"sse2"}))
    assert trained == ["opennmt", "marian"]
    assert decoded == ["opennmt", "marian", "opennmt-int8", "marian-conv-intgemm16"]
    calls = []
    monkeypatch.setattr(anchors.subprocess, "run",  # "python -m venv DIR"
                        lambda cmd, check: calls.append(cmd) or Path(cmd[-1]).mkdir(parents=True))
    monkeypatch.setattr(anchors, "run", lambda cmd, log_file, append=False: calls.append(cmd))
    python = anchors.ensure_venv("marian", tmp_path, lambda msg: None)
    assert python == tmp_path / "marian" / "bin" / "python"
    installs = [c for c in calls if "install" in c]
    assert len(installs) == 1 and installs[0][-1] == "pymarian==1.12.42"
    assert not any(str(word).startswith("torch==") for c in calls for word in c)
    assert anchors.ensure_venv("marian", tmp_path, lambda msg: None) == python and len(calls) == 3  # once


def test_marian_flops_count_its_own_narrower_output_layer():
    base = anchors.marian_flops_per_target_token(256, 256, 8000, 1.0, 14.0)
    assert anchors.marian_flops_per_target_token(256, 256, 9000, 1.0, 14.0) - base == 3 * 2 * 256 * 1000
    # per source word, the keys are 512 x 512 (its attention is as wide as the annotations)
    longer = anchors.marian_flops_per_target_token(256, 256, 8000, 2.0, 14.0)
    assert longer - base == 3 * 2 * (2 * 3 * 256 * 512 + 512 * 512)
    # its 256 x V output layer against rnnsearch's 512 x V: fewer FLOPs a token than rnnsearch's
    ours = bench.flops_per_target_token(ModelConfig(emb=256, hidden=256, align=256, maxout=512),
                                        8000, 1.0, 14.0)["train_mflop"] * 1e6
    assert base < ours < anchors.anchor_flops_per_target_token(256, 256, 512, 8000, 1.0, 14.0)


def three_systems(tmp_path, failing: str) -> "bench.SideBySide":
    """A side-by-side run of rnnsearch, OpenNMT-py and Marian (two GEMM types, `failing` crashing
    as Marian crashes), every process replaced by its timings."""
    sbs = object.__new__(bench.SideBySide)
    sbs.args = argparse.Namespace(decode_rounds=2)
    sbs.anchor_variants = {**bench.ANCHOR_VARIANTS,
                           **{n: v for n, v in anchors.marian_variants({"avx2", "avx512f"}).items()
                              if n in ("marian-packed8", failing)}}
    sbs.ours, sbs.trained, sbs.failed = ["rnnsearch"], ["rnnsearch"], {}
    sbs.anchor_names, sbs.anchors = bench.anchor_systems(["opennmt", "marian"], sbs.anchor_variants)
    sbs.decoders, sbs.batches, sbs.n_test, sbs.work = sbs.ours + sbs.anchors, [64], 100, tmp_path
    sbs.decoding = {name: {(b, n): [] for b in (1, 5) for n in sbs.batches} for name in sbs.decoders}
    sbs.outputs = {}
    seconds = {"rnnsearch": 1.0, "opennmt": 4.0, "opennmt-int8": 5.0, "marian": 2.0, "marian-packed8": 1.6}
    calls = []

    def translate(name, beam, batch, out):
        calls.append(name)
        if name == failing:
            raise anchors.MarianError(anchors.marian_error(MARIAN_CRASH))
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text("▁a ▁b ▁c ▁d ▁e\n" * 100)
        return {"seconds": seconds[name] * beam, "peak_rss_mb": 100.0}

    sbs.translate, sbs.calls = translate, calls
    tr = lambda tok, rss: {"A": {"tgt_tok_per_s": tok, "peak_rss_mb": rss, "seconds": 9.0},  # noqa: E731
                           "B": {"tgt_tok_per_s": tok, "peak_rss_mb": rss, "seconds": 9.0}}
    sbs.training = {"rnnsearch": tr(3000.0, 500.0), "opennmt": tr(1500.0, 1000.0),
                    "marian": tr(1200.0, 800.0)}
    return sbs


def test_side_by_side_with_marian_gives_every_ratio_and_records_a_crashing_gemm_type(tmp_path):
    sbs = three_systems(tmp_path, "marian-conv-packed8avx512")
    sbs.decode_rounds()
    assert sbs.calls.count("marian-conv-packed8avx512") == 1  # tried once, never again
    assert sbs.calls.count("marian") == sbs.calls.count("rnnsearch") == 4  # rounds x beams
    assert sbs.failed == {"marian-conv-packed8avx512": anchors.marian_error(MARIAN_CRASH)}
    flops = {"rnnsearch": 41.3e6, "opennmt": 45.2e6, "marian": 30e6}
    systems = {name: sbs.training_entry(name, flops, {"fp32": 100.0, "bf16": 200.0})
               for name in ("rnnsearch", "opennmt", "marian")}
    ratios = sbs.ratios(systems)
    assert ratios["rnnsearch/marian"] == {"greedy_sent_per_s": [2.0, 2.0], "beam5_sent_per_s": [2.0, 2.0],
                                          "train_tgt_tok_per_s": [2.5, 2.5], "train_peak_rss": 0.62}
    assert ratios["rnnsearch/opennmt"]["train_tgt_tok_per_s"] == [2.0, 2.0]
    assert ratios["rnnsearch/marian-packed8"]["beam5_sent_per_s"] == [1.6, 1.6]
    assert ratios["fastest/marian-fastest"] == {"greedy_sent_per_s": [1.6, 1.6],
                                                "beam5_sent_per_s": [1.6, 1.6]}
    assert ratios["fastest/opennmt-fastest"]["greedy_sent_per_s"] == [4.0, 4.0]
    assert ratios["fastest/fastest"]["beam5_sent_per_s"] == [1.6, 1.6]
    assert not any("packed8avx512" in key for key in ratios)
    sbs.data = {"test_refs": ["a b c d e"] * 100, "tgt_tok": argparse.Namespace(
        sp=argparse.Namespace(decode_pieces=lambda pieces: "".join(pieces).replace("▁", " ").strip()))}
    failed = sbs.system("marian-conv-packed8avx512", flops, {"fp32": 100.0})
    assert failed == {"decodes_model_of": "marian", "gemm_type": "packed8avx512 (converted)",
                      "quantize": "int8", "failed": sbs.failed["marian-conv-packed8avx512"]}
    online = sbs.system("marian-packed8", flops, {"fp32": 100.0})
    assert online["gemm_type"] == "packed8 (online)" and online["bleu_beam5"] == 100.0
    assert online["greedy_sent_per_s"] == [62.5, 62.5]
    json.dumps({"systems": {"marian-packed8": online}, "ratios": ratios})  # the JSON holds them as they are


def test_side_by_side_only_forgives_marians_gemm_types(tmp_path):
    sbs = three_systems(tmp_path, "marian")  # the fp32 model itself failing is a real failure
    with pytest.raises(anchors.MarianError, match="Segmentation fault"):
        sbs.decode_rounds()


def test_time_to_bleu_trains_marian_with_checkpoints_it_can_find(tmp_path, monkeypatch):
    got = {}
    monkeypatch.setattr(curve, "timed_run", lambda cmd, log, env, ckpts, points: got.update(
        cmd=cmd, ckpts=ckpts, env=env) or {})
    args = argparse.Namespace(save_steps=25, threads=1, points=[2.0])
    curve.train_marian(tmp_path / "m", {"dir": tmp_path}, args, tmp_path / "bin" / "python", None)
    cmd = got["cmd"]
    assert cmd[cmd.index("--save-freq") + 1] == "25u" and cmd[cmd.index("--cpu-threads") + 1] == "1"
    for name in ("model.iter25.npz", "model.iter25.npz.decoder.yml", "model.npz", "model.npz.optimizer.npz"):
        (tmp_path / "m" / name).write_text("x")
    assert [p.name for p in got["ckpts"]()] == ["model.iter25.npz"]
    assert "marian" in curve.SYSTEMS and curve.system_options("marian@lr0.002") == ("marian", {"lr": 0.002})


def test_reuse_training_trains_only_what_the_record_lacks(tmp_path):
    sbs = three_systems(tmp_path, "marian-packed8")
    trained = []

    def train(name, where, steps):
        trained.append((name, where.parent.name, steps))
        model = where / "model"
        model.mkdir(parents=True, exist_ok=True)
        return {"tgt_tok_per_s": 1000.0 + steps, "peak_rss_mb": 1.0, "seconds": 1.0, "model": str(model)}

    sbs.train = train
    sbs.args = argparse.Namespace(short_steps=10, steps=30, reuse_training=True)
    sbs.train_rounds()  # nothing recorded yet: everything trains, round A then B reversed
    assert [n for n, r, _ in trained] == ["rnnsearch", "opennmt", "marian", "marian", "opennmt", "rnnsearch"]
    first = json.loads((tmp_path / "training.json").read_text())
    assert first["marian"]["B"]["steps"] == 30 and first["rnnsearch"]["A"]["tgt_tok_per_s"] == 1010.0
    trained.clear()
    shutil.rmtree(tmp_path / "train-B" / "opennmt")  # a model gone from disk is trained again
    sbs.train_rounds()
    assert trained == [("opennmt", "train-B", 30)]
    assert sbs.training["marian"] == first["marian"]
    trained.clear()
    sbs.args = argparse.Namespace(short_steps=10, steps=40, reuse_training=True)  # other steps: round B again
    sbs.train_rounds()
    assert sorted(trained) == [(name, "train-B", 40) for name in ("marian", "opennmt", "rnnsearch")]
    trained.clear()
    sbs.args = argparse.Namespace(short_steps=10, steps=40, reuse_training=False)
    sbs.train_rounds()
    assert len(trained) == 6


def test_decode_profile_prints_the_operators_of_a_translation(reverse_model, tmp_path):
    src = tmp_path / "src.txt"
    src.write_text("".join(s + "\n" for s in toy_pairs(12, "reverse", seed=5, **TOY)[0]))
    out = subprocess.run([sys.executable, "-m", "benchmarks.decode_profile", "--model", str(reverse_model),
                          "--src", str(src), "--beam", "3", "--batch", "4", "--workers", "2", "--rows", "8"],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    header, *table = out.stdout.splitlines()
    assert "12 sentences, fp32, beam 3, batches of 4, 1 thread(s), 2 search(es)" in header
    assert any("aten::" in line for line in table) and "Self CPU time total" in out.stdout


def test_peak_memory_is_given_for_each_batch_size_beside_the_overall_peak(tmp_path):
    sbs = three_systems(tmp_path, "marian-packed8")
    sbs.batches = [64, 128]
    sbs.decoding = {name: {(b, n): [] for b in (1, 5) for n in sbs.batches} for name in sbs.decoders}
    translate = sbs.translate

    def sized(name, beam, batch, out):
        return {**translate(name, beam, batch, out), "peak_rss_mb": float(batch * beam)}

    sbs.translate = sized
    sbs.decode_rounds()
    sbs.data = {"test_refs": ["a b c d e"] * 100, "tgt_tok": argparse.Namespace(
        sp=argparse.Namespace(decode_pieces=lambda pieces: "".join(pieces).replace("▁", " ").strip()))}
    entry = sbs.system("marian", {"marian": 30e6}, {"fp32": 100.0})
    assert entry["decode_peak_rss_mb_by_batch"] == {"beam1": {"64": 64.0, "128": 128.0},
                                                    "beam5": {"64": 320.0, "128": 640.0}}
    assert entry["decode_peak_rss_mb"] == 640.0
