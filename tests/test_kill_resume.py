"""Crash safety: a run killed with SIGKILL at several points and resumed ends with exactly the
weights of an uninterrupted run (CPU, fixed seed)."""

import json
import signal
import subprocess
import sys
import time

import torch
from conftest import toy_config
from safetensors.torch import load_file


def start(args):
    return subprocess.Popen([sys.executable, "-m", "rnnsearch", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def logged(model_dir):
    """The records of the run's log.jsonl so far."""
    path = model_dir / "log.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def last_step(model_dir):
    return max((r.get("step", -1) for r in logged(model_dir)), default=-1)


def kill_at(proc, model_dir, step, timeout=120, sig=signal.SIGKILL):
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if last_step(model_dir) >= step:
            proc.send_signal(sig)
            return proc.wait(timeout=timeout)
        time.sleep(0.01)
    raise AssertionError(f"run ended or stalled before step {step}: {proc.stderr.read()[-2000:]}")


def test_sigkill_and_resume_reach_the_same_weights(tmp_path):
    cfg = toy_config(tmp_path, "ref", max_steps=40, batch_size=64, valid_every=4, log_every=1, max_epochs=0)
    cfg.model.dropout_emb = cfg.model.dropout_readout = 0.2
    cfg.model.word_dropout = 0.1
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg.to_dict()))
    ref = start(["train", str(path)])
    assert ref.wait(timeout=300) == 0, ref.stderr.read()[-2000:]

    killed = tmp_path / "killed"
    proc = start(["train", str(path), "--model-dir", str(killed)])
    kill_at(proc, killed, 9)  # mid-epoch, between checkpoints
    proc = start(["train", "--resume", str(killed)])
    kill_at(proc, killed, 27)  # in the second epoch
    proc = start(["train", "--resume", str(killed)])
    assert proc.wait(timeout=300) == 0, proc.stderr.read()[-2000:]

    assert not list(killed.glob(".*.tmp"))  # nothing half-written left behind
    assert len(list((killed / "prepared").glob("train-*"))) == 1  # memory-mapped pairs, prepared once
    # the steps trained again after each kill are logged once: the log reads as the reference's
    steps = [[(r["step"], r["kind"]) for r in logged(d)] for d in (tmp_path / "ref", killed)]
    assert steps[1] == steps[0]
    a = load_file(str(tmp_path / "ref" / "last.safetensors"))
    b = load_file(str(killed / "last.safetensors"))
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_sigterm_to_the_command_saves_and_says_how_to_resume(tmp_path):
    cfg = toy_config(tmp_path, "run", max_steps=200, batch_size=64, log_every=1, max_epochs=0)
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg.to_dict()))
    run = tmp_path / "run"
    proc = start(["train", str(path)])
    assert kill_at(proc, run, 5, sig=signal.SIGTERM) == 128 + signal.SIGTERM
    err = proc.stderr.read()
    assert "Traceback" not in err and f"`rnnsearch train --resume {run}` continues it" in err
    step = json.loads((run / "train_state.json").read_text())["step"]
    assert step >= 5 and not (run / "DONE").exists()
    assert not list(run.glob(".*.tmp"))
    proc = start(["train", "--resume", str(run), "--set", "train.max_steps=" + str(step + 3)])
    assert proc.wait(timeout=300) == 0, proc.stderr.read()[-2000:]
    assert json.loads((run / "DONE").read_text())["step"] == step + 3
