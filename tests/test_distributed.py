"""Data-parallel training: 2 ranks on CPU (gloo) through torchrun match one process."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from conftest import TOY
from safetensors.torch import load_file

from rnnsearch.tools.toy import write_toy_corpus


def write_config(tmp_path, model=None, **train):
    data = write_toy_corpus(tmp_path / "data", task="reverse", n_train=600, n_valid=20, **TOY)
    train_cfg = {"max_epochs": 5, "lr": 0.01, "batch_size": 32, "batching": "bucket", "valid_every": 0,
                 "progress": False, "tensorboard": False, "threads": 1, "log_every": 1}
    train_cfg.update(train)
    cfg = {"preset": "tiny", "data": data,
           "model": {"emb": 16, "hidden": 16, "align": 16, "maxout": 16, **(model or {})}, "train": train_cfg}
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    return path


def run(args, ranks=1):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if ranks > 1:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}",
               "-m", "rnnsearch", *args]
    else:
        cmd = [sys.executable, "-m", "rnnsearch", *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    return res


def train_losses(model_dir):
    records = [json.loads(x) for x in (model_dir / "log.jsonl").read_text().splitlines()]
    return [r["loss"] for r in records if r.get("kind") == "train"], records


@pytest.mark.parametrize("agreement", [0.0, 1.0])
def test_two_ranks_match_one_process_and_each_other(tmp_path, agreement):
    # agreement: both directions trained jointly (train.agreement), one DDP over the pair. Larger
    # initial weights there: near uniform attention, mul's gradient is a difference of nearly equal
    # terms, float32 noise that Adam scales up to whole steps (weights 1e-4 apart after 8 steps)
    model = {"init_scale": 0.5} if agreement else None
    cfg = write_config(tmp_path, model, max_steps=8, agreement=agreement)
    run(["train", str(cfg), "--model-dir", str(tmp_path / "single")])
    run(["train", str(cfg), "--model-dir", str(tmp_path / "ddp")], ranks=2)
    single, one = train_losses(tmp_path / "single")
    ddp, records = train_losses(tmp_path / "ddp")
    # same global batches, same normalisation: the same losses up to summation order
    assert len(single) == len(ddp) == 8
    assert ddp == pytest.approx(single, rel=1e-4)
    if agreement:
        for key in ("reverse_loss", "disagreement"):
            train = [[r[key] for r in log if r.get("kind") == "train"] for log in (one, records)]
            assert train[1] == pytest.approx(train[0], rel=1e-4), key
    ranks = next(r for r in records if r.get("kind") == "ranks")
    assert ranks["world"] == 2 and ranks["identical"], ranks
    assert len(list((tmp_path / "ddp" / "prepared").glob("train-*"))) == 1  # rank 0's, mapped by both
    for sub in ("", "reverse/") if agreement else ("",):
        a = load_file(str(tmp_path / "single" / sub / "last.safetensors"))
        b = load_file(str(tmp_path / "ddp" / sub / "last.safetensors"))
        for k in a:
            # summation order differs between one batch and two halves, and Adam turns that
            # float32 noise into steps where a gradient is near zero: 8.3e-6 for W_a here (at 1
            # and 2 threads, 2026-12-06). The sigmoid form of the score in training had made it
            # 1e-4, one reason training keeps tanh (nn/attention.py).
            assert torch.allclose(a[k], b[k], atol=1e-5), sub + k


def test_bad_data_stops_every_rank_with_one_message(tmp_path):
    cfg = write_config(tmp_path, max_steps=4)
    bad = tmp_path / "data" / "train.src"  # the toy corpus's source file, broken 300 lines in
    lines = bad.read_bytes().split(b"\n")
    lines[299] += b" \xff"
    bad.write_bytes(b"\n".join(lines))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "rnnsearch", "train", str(cfg), "--model-dir", str(tmp_path / "ddp")]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode != 0
    message = f"rnnsearch: error: {bad}:300: invalid UTF-8 (byte 0xff)"
    assert res.stderr.count(message) == 2, res.stderr[-3000:]  # each rank says it, none waits
    assert not (tmp_path / "ddp").exists()


def test_two_ranks_resume_mid_epoch_to_the_same_weights(tmp_path):
    # 600 pairs in batches of 32: step 7 is in the middle of the first epoch
    cfg = write_config(tmp_path, {"word_dropout": 0.1}, max_steps=12)
    run(["train", str(cfg), "--model-dir", str(tmp_path / "straight")], ranks=2)
    run(["train", str(cfg), "--model-dir", str(tmp_path / "cut"), "--set", "train.max_steps=7"], ranks=2)
    run(["train", "--resume", str(tmp_path / "cut"), "--set", "train.max_steps=12"], ranks=2)
    state = json.loads((tmp_path / "cut" / "train_state.json").read_text())
    assert state["step"] == 12 and state["epoch"] == 0  # resumed inside the epoch it was cut in
    a = load_file(str(tmp_path / "straight" / "last.safetensors"))
    b = load_file(str(tmp_path / "cut" / "last.safetensors"))
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_resume_with_a_different_number_of_ranks(tmp_path):
    cfg = write_config(tmp_path, max_steps=10)
    run(["train", str(cfg), "--model-dir", str(tmp_path / "straight")])
    run(["train", str(cfg), "--model-dir", str(tmp_path / "moved"), "--set", "train.max_steps=5"], ranks=2)
    run(["train", "--resume", str(tmp_path / "moved"), "--set", "train.max_steps=10"])
    a = load_file(str(tmp_path / "straight" / "last.safetensors"))
    b = load_file(str(tmp_path / "moved" / "last.safetensors"))
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-5), k


def test_sigterm_stops_every_rank_at_one_step_with_a_checkpoint(tmp_path):
    # torchrun passes SIGTERM on to its ranks: rank 0's request is broadcast, so both stop after
    # the same update, rank 0 saves, and none waits forever on a collective the other left
    cfg = write_config(tmp_path, max_steps=100000, max_epochs=0)
    out = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "rnnsearch", "train", str(cfg), "--model-dir", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    log = out / "log.jsonl"
    deadline = time.time() + 120
    while not (log.exists() and len(log.read_text().splitlines()) >= 3):
        assert proc.poll() is None and time.time() < deadline, proc.stderr.read()[-3000:]
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode != 0 and not (out / "DONE").exists()
    step = json.loads((out / "train_state.json").read_text())["step"]
    assert f"SIGTERM at step {step};" in err  # both ranks say the same step
    assert err.count(f"SIGTERM at step {step};") == 2, err[-3000:]
    run(["train", "--resume", str(out), "--set", f"train.max_steps={step + 2}"], ranks=2)
    assert json.loads((out / "DONE").read_text())["step"] == step + 2
