"""Each experiment runs end to end at a toy budget, and a re-run reuses finished models."""

import json
import subprocess
from pathlib import Path

import pytest

from rnnsearch.tools.experiments import run_experiments


def run_experiment(name: str, **kw) -> dict:
    """One experiment's results: run_experiments([name], ...)'s one entry."""
    return run_experiments([name], **kw)[0]


@pytest.mark.parametrize("name", ["length-curve", "reverse", "scores"])
def test_experiment_at_a_toy_budget(tmp_path, name):
    r = run_experiment(name, corpus="synthetic", minutes=0.02, out_dir=tmp_path, train_sentences=200, seed=3,
                       test_sentences=8, max_clauses=1)
    assert len(r["systems"]) == 4
    for f in ("results.json", "results.md", "by_length.png", "training_curves.png"):
        assert (tmp_path / name / f).exists(), f
    saved = json.loads((tmp_path / name / "results.json").read_text())
    assert [s["label"] for s in saved["systems"]] == [s["label"] for s in r["systems"]]
    assert all(len(s["by_length"]) == 7 and s["curve"] for s in r["systems"])
    if name == "length-curve":
        assert {s["config"]["data"]["max_len"] for s in r["systems"]} == {30, 50}
        assert [s["config"]["model"]["arch"] for s in r["systems"]].count("rnnencdec") == 2
    if name == "reverse":
        assert [s["config"]["data"]["reverse_source"] for s in r["systems"]] == [False, True, False, True]
    if name == "scores":
        assert all("attention_entropy" in s for s in r["systems"])
        table = (tmp_path / name / "results.md").read_text().splitlines()
        assert "attention entropy" in table[2]
        assert all(row.count("|") == table[2].count("|") for row in table[3:])  # a value in every row
    # a second run reuses the finished models: nothing is trained again
    stamps = {p: p.stat().st_mtime for p in tmp_path.glob("models/*/model.safetensors")}
    run_experiment(name, corpus="synthetic", minutes=0.02, out_dir=tmp_path, train_sentences=200, seed=3,
                       test_sentences=8, max_clauses=1)
    assert stamps == {p: p.stat().st_mtime for p in tmp_path.glob("models/*/model.safetensors")}


def test_experiments_on_a_corpus_share_their_models(tmp_path):
    kw = dict(corpus="synthetic", minutes=0.01, out_dir=tmp_path, train_sentences=150, seed=2,
              test_sentences=6, max_clauses=1)
    length = run_experiment("length-curve", **kw)
    pool = set(tmp_path.glob("models/*"))
    assert len(pool) == 4
    reverse = run_experiment("reverse", **kw)
    scores = run_experiment("scores", **kw)
    by_label = {s["label"]: s["model_dir"] for r in (length, reverse, scores) for s in r["systems"]}
    assert by_label["RNNsearch-50"] == by_label["RNNsearch"] == by_label["additive"]
    assert by_label["RNNencdec-50"] == by_label["RNNencdec"]
    assert len(set(tmp_path.glob("models/*"))) == 4 + 2 + 3  # 9 models for the 12 systems


def test_real_corpus_splits_are_seeded_subsamples(tmp_path):
    from rnnsearch.tools.experiments import corpus_splits

    root = tmp_path / "data" / "multi30k"
    root.mkdir(parents=True)
    for split, n in (("train", 50), ("val", 30), ("test_2016_flickr", 20)):
        for lang in ("de", "en"):
            (root / f"{split}.{lang}.gz").write_bytes(
                __import__("gzip").compress("".join(f"{lang} {split} {i}\n" for i in range(n)).encode()))
    paths = corpus_splits("multi30k-de-en", tmp_path / "exp", tmp_path / "data", train_sentences=20, seed=1,
                    test_sentences=0, valid_sentences=10)
    assert paths["test.src"].endswith("test_2016_flickr.de.gz")  # 0: the whole split
    src = open(paths["train.src"]).read().splitlines()
    tgt = open(paths["train.tgt"]).read().splitlines()
    assert len(src) == 20 and [s.split()[-1] for s in src] == [t.split()[-1] for t in tgt]  # still aligned
    assert len(open(paths["valid.src"]).read().splitlines()) == 10
    again = corpus_splits("multi30k-de-en", tmp_path / "exp2", tmp_path / "data", train_sentences=20, seed=1,
                    test_sentences=0, valid_sentences=10)
    assert open(again["train.src"]).read() == "\n".join(src) + "\n"
    other = corpus_splits("multi30k-de-en", tmp_path / "exp", tmp_path / "data", train_sentences=30, seed=1,
                    test_sentences=0, valid_sentences=10)
    assert other["train.src"] != paths["train.src"]  # another sample is another file (and other models)


def test_overrides_reach_every_model_and_get_their_own_pool(tmp_path):
    kw = dict(corpus="synthetic", minutes=0.01, out_dir=tmp_path, train_sentences=150, seed=2,
              test_sentences=6, max_clauses=1)
    plain = run_experiment("reverse", **kw)
    small = run_experiment("reverse", overrides=["model.hidden=16", "model.score=dot"], **kw)
    assert all(s["config"]["model"]["hidden"] == 16 for s in small["systems"])
    # the experiment's own setting wins
    assert all(s["config"]["model"]["score"] == "additive" for s in small["systems"])
    assert not {s["model_dir"] for s in small["systems"]} & {s["model_dir"] for s in plain["systems"]}
    assert "with model.hidden=16" in (tmp_path / "reverse" / "results.md").read_text()
    from rnnsearch.config import ConfigError

    with pytest.raises(ConfigError, match="model.hiden"):
        run_experiment("reverse", overrides=["model.hiden=16"], **kw)


def test_a_step_budget_trains_every_model_that_many_steps(tmp_path):
    kw = dict(corpus="synthetic", out_dir=tmp_path, train_sentences=150, seed=2, test_sentences=6,
              max_clauses=1)
    r = run_experiment("scores", steps=7, **kw)
    assert [s["train_steps"] for s in r["systems"]] == [7] * 4
    # no clock: a busy machine changes nothing
    assert all(s["config"]["train"]["max_minutes"] == 0 for s in r["systems"])
    assert r["steps_per_model"] == 7 and "minutes_per_model" not in r
    table = (tmp_path / "scores" / "results.md").read_text()
    assert "7 training steps per model" in table
    # the training time of the whole run (every resumed call), and what scored it, are recorded
    for s in r["systems"]:
        state = json.loads((Path(s["model_dir"]) / "train_state.json").read_text())
        assert s["train_seconds"] == round(state["seconds"], 1) > 0
    import datetime

    assert r["scored_on"].startswith(datetime.date.today().isoformat()) and "torch" in r["scored_on"]
    assert f"scored {r['scored_on']}" in table and " h) |" in table
    timed = run_experiment("scores", minutes=0.01, **kw)  # another budget, other models
    assert not {s["model_dir"] for s in timed["systems"]} & {s["model_dir"] for s in r["systems"]}
    from rnnsearch.io import DataError

    with pytest.raises(DataError, match="budget must be positive"):
        run_experiment("scores", steps=-1, **kw)


def test_two_experiments_train_their_models_once_in_parallel_processes(tmp_path, capsys):
    from rnnsearch.cli import main

    args = ["experiment", "length-curve", "reverse", "--corpus", "synthetic", "--budget-steps", "5",
            "--out", str(tmp_path), "--train-sentences", "150", "--test-sentences", "6", "--seed", "2",
            "--jobs", "2"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "## length-curve" in printed and "## reverse" in printed
    # 4 + 4 systems, 2 shared (RNNsearch-50 is the unreversed RNNsearch): 6 models, each with its log
    pool = sorted(p for p in (tmp_path / "models").iterdir() if p.is_dir())
    assert len(pool) == 6 and all((p / "DONE").exists() for p in pool)
    assert all("training stopped" in (p.parent / f"{p.name}.log").read_text() for p in pool)
    # each process had one of the machine's cores, and the threads are not part of a model's name
    configs = [json.loads((p / "config.json").read_text()) for p in pool]
    assert {c["train"]["threads"] for c in configs} == {max(1, (__import__("os").cpu_count() or 1) // 2)}
    reverse = json.loads((tmp_path / "reverse" / "results.json").read_text())
    length = json.loads((tmp_path / "length-curve" / "results.json").read_text())
    assert reverse["jobs"] == 2 and [s["train_steps"] for s in reverse["systems"]] == [5] * 4
    assert {s["model_dir"] for s in reverse["systems"]} & {s["model_dir"] for s in length["systems"]}
    # the same experiment in this process finds them finished: nothing is trained again
    stamps = {p: (p / "model.safetensors").stat().st_mtime for p in pool}
    again = run_experiment("reverse", corpus="synthetic", steps=5, out_dir=tmp_path, train_sentences=150,
                           seed=2, test_sentences=6)
    assert {Path(s["model_dir"]) for s in again["systems"]} <= set(pool)
    assert stamps == {p: (p / "model.safetensors").stat().st_mtime for p in pool}
    assert main(["experiment", "reverse", "--jobs", "0", "--out", str(tmp_path)]) == 2


def test_score_trained_scores_the_finished_models_and_trains_nothing(tmp_path, capsys):
    """A long run's finished models can be looked at while the rest train: `--score-trained`
    writes the results of those, lists the others, and starts no training of its own."""
    from rnnsearch.cli import main

    common = ["--corpus", "synthetic", "--budget-steps", "3", "--out", str(tmp_path), "--train-sentences",
              "150", "--test-sentences", "6", "--seed", "2"]
    assert main(["experiment", "reverse", "--score-trained", *common]) == 2  # nothing has finished
    assert "no model of reverse has finished training yet" in capsys.readouterr().err
    assert not (tmp_path / "reverse").exists()
    assert main(["experiment", "scores", *common]) == 0  # its additive model is reverse's RNNsearch
    pool = {p for p in (tmp_path / "models").iterdir() if p.is_dir()}
    capsys.readouterr()
    assert main(["experiment", "reverse", "--score-trained", *common]) == 0
    assert {p for p in (tmp_path / "models").iterdir() if p.is_dir()} == pool  # no training began
    r = json.loads((tmp_path / "reverse" / "results.json").read_text())
    assert [s["label"] for s in r["systems"]] == ["RNNsearch"]
    assert r["not_trained"] == ["RNNencdec", "RNNencdec reversed", "RNNsearch reversed"]
    assert r["systems"][0]["train_steps"] == 3 and r["systems"][0]["trained_seconds_this_run"] == 0
    table = (tmp_path / "reverse" / "results.md").read_text()
    assert "Not trained yet: RNNencdec, RNNencdec reversed, RNNsearch reversed." in table
    assert "Not trained yet" in capsys.readouterr().out
    # an experiment none of whose models has finished is said so, beside one that has some
    shared = Path(r["systems"][0]["model_dir"])
    (shared / "DONE").unlink()  # RNNsearch-50 back in training: reverse has nothing finished
    capsys.readouterr()
    assert main(["experiment", "reverse", "scores", "--score-trained", *common]) == 0
    printed = capsys.readouterr().out
    assert "reverse on synthetic: no system trained yet (RNNencdec, RNNencdec reversed, RNNsearch, " \
           "RNNsearch reversed)" in printed
    scores = json.loads((tmp_path / "scores" / "results.json").read_text())
    assert [s["label"] for s in scores["systems"]] == ["dot", "general", "scaled_dot"]
    assert scores["not_trained"] == ["additive"]


def test_only_trains_the_named_systems_and_scores_them_with_the_finished(tmp_path, capsys):
    """`--only` shares a long run out between sessions or machines: it trains just the systems it
    names, scores them beside whichever others have finished, and lists the rest as not trained."""
    from rnnsearch.cli import main

    common = ["--corpus", "synthetic", "--budget-steps", "3", "--out", str(tmp_path), "--train-sentences",
              "150", "--test-sentences", "6", "--seed", "2"]
    assert main(["experiment", "reverse", "--only", "RNNsearch-50", *common]) == 2
    err = capsys.readouterr().err
    assert "no system 'RNNsearch-50' in reverse" in err and "'RNNsearch reversed'" in err
    assert not (tmp_path / "models").exists()  # nothing was trained for a bad label
    two = ["--only", "RNNsearch", "--only", "RNNencdec reversed"]
    assert main(["experiment", "reverse", *two, *common]) == 0
    pool = {p for p in (tmp_path / "models").iterdir() if p.is_dir()}
    names = sorted(p.name.rsplit("-", 1)[0] for p in pool)
    assert names == ["rnnencdec-50-reversed", "rnnsearch-50-additive"]
    r = json.loads((tmp_path / "reverse" / "results.json").read_text())
    assert [s["label"] for s in r["systems"]] == ["RNNencdec reversed", "RNNsearch"]
    assert r["not_trained"] == ["RNNencdec", "RNNsearch reversed"]
    # length-curve's RNNsearch-50 is that RNNsearch: finished, so --only trains nothing new, and a
    # thread count of its own is no other model
    stamps = {p: (p / "model.safetensors").stat().st_mtime for p in pool}
    again = ["--only", "RNNsearch-50", "--set", "train.threads=2"]
    assert main(["experiment", "length-curve", *again, *common]) == 0
    assert {p for p in (tmp_path / "models").iterdir() if p.is_dir()} == pool
    assert stamps == {p: (p / "model.safetensors").stat().st_mtime for p in pool}
    curve = json.loads((tmp_path / "length-curve" / "results.json").read_text())
    assert [s["label"] for s in curve["systems"]] == ["RNNsearch-50"]
    assert curve["not_trained"] == ["RNNencdec-30", "RNNencdec-50", "RNNsearch-30"]


def test_a_pool_job_resumes_with_its_share_of_the_cores(tmp_path, monkeypatch):
    # a run started alone with 2 threads (its config.json says so), resumed as one of two jobs
    from rnnsearch.tools import experiments

    model_dir = tmp_path / "models" / "rnnsearch-50"
    model_dir.mkdir(parents=True)
    (model_dir / "train_state.safetensors").write_bytes(b"")
    calls = []

    def run(cmd, **kw):
        calls.append((cmd, kw["env"]))
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(experiments.subprocess, "run", run)
    experiments._train_process(model_dir, {"train": {"threads": 1}})
    (cmd, env), = calls
    assert cmd[-4:] == ["--resume", str(model_dir), "--set", "train.threads=1"]
    assert env["OMP_NUM_THREADS"] == "1"
