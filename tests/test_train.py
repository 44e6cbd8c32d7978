"""End to end: train on a toy task, translate, save/load, resume, and the command line."""

import json
import signal
import subprocess
import sys

import pytest
import torch
from conftest import TOY, toy_config
from safetensors.torch import load_file

import rnnsearch
from rnnsearch.config import ConfigError, TrainConfig
from rnnsearch.engine.checkpoint import CheckpointError
from rnnsearch.engine.train.launch import TrainingInterrupted
from rnnsearch.engine.train.trainer import Trainer, train
from rnnsearch.tools.toy import toy_pairs


def test_learns_to_reverse_with_anti_diagonal_attention(reverse_model):
    model = rnnsearch.load(reverse_model, device="cpu")
    src, tgt = toy_pairs(100, "reverse", seed=99, **TOY)
    out = model.translate(src, beam=3)
    assert sum(o.text == g for o, g in zip(out, tgt)) >= 90
    on_diagonal = total = 0
    for s, o in zip(src, out):
        n = len(s.split())
        for i, row in enumerate(o.attention[: len(o.tokens)]):
            total += 1
            on_diagonal += max(range(n), key=row.__getitem__) == n - 1 - i
    assert on_diagonal / total >= 0.8  # attention found the reversed alignment


def test_model_directory_layout_and_round_trip(reverse_model):
    names = {p.name for p in reverse_model.iterdir()}
    assert {"config.json", "model.safetensors", "last.safetensors", "train_state.json",
            "train_state.safetensors", "joint.vocab.txt", "log.jsonl"} <= names or \
           {"config.json", "model.safetensors", "src.vocab.txt", "tgt.vocab.txt"} <= names
    assert not any(n.endswith((".tmp", ".pt", ".pkl")) for n in names)
    records = [json.loads(line) for line in (reverse_model / "log.jsonl").read_text().splitlines()]
    assert any(r.get("kind") == "train" and "tok_per_s" in r for r in records)
    assert any("valid_bleu" in r for r in records)
    a = rnnsearch.load(reverse_model, device="cpu")
    b = rnnsearch.load(reverse_model, device="cpu")
    src = ["w1 w2 w3 w4", "w9 w8 w7 w6 w5 w4", "w0 w0 w1"]
    ta, tb = a.translate_n_best(src, n_best=2), b.translate_n_best(src, n_best=2)
    for x, y in zip(ta, tb):
        assert [h.text for h in x] == [h.text for h in y]
        assert [h.score for h in x] == [h.score for h in y]
        assert x[0].attention == y[0].attention
    # the translator's model equals the saved weights exactly
    saved = load_file(str(reverse_model / "model.safetensors"))
    for k, v in a.model.state_dict().items():
        assert torch.equal(v, saved[k])


def test_translation_api_shapes(reverse_model):
    model = rnnsearch.load(reverse_model, device="cpu")
    results = model.translate(["w1 w2 w3", "", "w4 w5 w6 w7 w8"], beam=4)
    assert results[1].text == "" and results[1].tokens == []
    t = results[2]
    att = t.attention_json()
    assert att["source"] == ["w4", "w5", "w6", "w7", "w8"]
    assert att["target"] == t.tokens + ["</s>"]
    assert len(att["weights"]) == len(att["target"])
    assert all(abs(sum(r) - 1) < 1e-5 and len(r) == 5 for r in att["weights"])
    forced = model.force(["w1 w2 w3", ""], ["w3 w2 w1", ""])  # teacher-forced attention
    assert len(forced[0]) == 4 and len(forced[0][0]) == 3 and forced[1] == []


def test_resume_reaches_the_same_weights(tmp_path):
    # dropout and word dropout on, so the RNG state has to be restored too
    kw = dict(max_epochs=3, batch_size=64)
    # dropout switches on after the cut at step 30 (train.dropout_start): resumed runs must switch too
    straight = toy_config(tmp_path, "straight", dropout_start=40, **kw)
    straight.model.dropout_emb = straight.model.dropout_readout = 0.2
    straight.model.word_dropout = 0.1
    train(straight)
    cut = toy_config(tmp_path, "cut", max_steps=30, keep_last=2, valid_every=10, dropout_start=40, **kw)
    cut.model = straight.model
    train(cut)
    with pytest.raises(CheckpointError, match="--resume"):
        train(cut)  # refuses to overwrite a run
    cut.train.max_steps = 0
    train(cut, resume=True)
    snaps = sorted(p.name for p in (tmp_path / "cut" / "checkpoints").iterdir())
    assert len(snaps) == 2 and snaps[-1] == "step-00000072.safetensors"  # keep_last=2, 24 steps an epoch
    a = load_file(str(tmp_path / "straight" / "last.safetensors"))
    b = load_file(str(tmp_path / "cut" / "last.safetensors"))
    for k in a:
        assert torch.equal(a[k], b[k]), k


def _signal_at(monkeypatch, steps: dict[int, list[signal.Signals]]):
    """Make the training loop receive these signals during the updates that reach these steps."""
    step = Trainer.train_step

    def train_step(self, *args, **kw):
        done = step(self, *args, **kw)
        for sig in steps.get(self.state.step, []):
            signal.raise_signal(sig)
        return done

    monkeypatch.setattr(Trainer, "train_step", train_step)


def test_sigterm_saves_a_checkpoint_that_resumes_to_the_same_weights(tmp_path, monkeypatch):
    kw = dict(max_steps=30, max_epochs=0, batch_size=64, valid_every=10, save_every_minutes=60)
    straight = toy_config(tmp_path, "straight", **kw)
    straight.model.dropout_emb = straight.model.dropout_readout = 0.2
    straight.model.word_dropout = 0.1
    train(straight)
    cut = toy_config(tmp_path, "cut", **kw)
    cut.model = straight.model
    handler = signal.getsignal(signal.SIGTERM)
    with monkeypatch.context() as m:
        _signal_at(m, {17: [signal.SIGTERM]})  # mid-epoch (24 steps an epoch), between saves
        with pytest.raises(TrainingInterrupted, match=r"SIGTERM at step 17.*--resume") as stopped:
            train(cut)
    assert stopped.value.signum == signal.SIGTERM and stopped.value.step == 17
    assert signal.getsignal(signal.SIGTERM) is handler  # the run's handlers are gone with it
    out = tmp_path / "cut"
    assert not (out / "DONE").exists()  # unfinished: the experiment pools resume it
    assert json.loads((out / "train_state.json").read_text())["step"] == 17
    last = json.loads((out / "log.jsonl").read_text().splitlines()[-1])
    assert last["kind"] == "interrupted" and last["step"] == 17 and "valid_loss" not in last
    train(cut, resume=True)
    assert json.loads((out / "DONE").read_text())["step"] == 30
    a = load_file(str(tmp_path / "straight" / "last.safetensors"))
    b = load_file(str(out / "last.safetensors"))
    for k in a:
        assert torch.equal(a[k], b[k]), k


@pytest.fixture
def sigint(request):
    """SIGINT's handler for the test (`request.param`), whatever pytest inherited: a shell without
    job control starts its background jobs, this suite's too, with SIGINT ignored."""
    inherited = signal.signal(signal.SIGINT, request.param)
    yield
    signal.signal(signal.SIGINT, inherited)


@pytest.mark.parametrize("sigint", [signal.default_int_handler], indirect=True)
def test_a_second_interrupt_stops_at_once(tmp_path, monkeypatch, sigint):
    cfg = toy_config(tmp_path, "run", max_steps=10, max_epochs=0, batch_size=64)
    _signal_at(monkeypatch, {3: [signal.SIGINT, signal.SIGINT]})
    with pytest.raises(KeyboardInterrupt) as stopped:
        train(cfg)
    assert not isinstance(stopped.value, TrainingInterrupted)  # no waiting for a save
    assert not (tmp_path / "run" / "train_state.json").exists()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.parametrize("sigint", [signal.SIG_IGN], indirect=True)
def test_a_run_started_ignoring_ctrl_c_keeps_ignoring_it(tmp_path, monkeypatch, sigint):
    # a background job of a script: a Ctrl-C meant for the foreground neither stops nor saves it
    cfg = toy_config(tmp_path, "run", max_steps=6, max_epochs=0, batch_size=64)
    _signal_at(monkeypatch, {3: [signal.SIGINT, signal.SIGINT]})
    train(cfg)
    assert json.loads((tmp_path / "run" / "DONE").read_text())["step"] == 6
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_dropout_start_trains_unregularised_first(tmp_path):
    # every dropout configured, but off for all 20 steps: the same weights as a run without any
    kw = dict(max_steps=20, max_epochs=0, batch_size=64, log_every=5)
    plain = toy_config(tmp_path, "plain", **kw)
    late = toy_config(tmp_path, "late", dropout_start=20, **kw)
    late.model.dropout_emb = late.model.dropout_readout = late.model.dropout_dec_state = 0.3
    late.model.word_dropout = 0.2
    early = toy_config(tmp_path, "early", dropout_start=10, **kw)
    early.model = late.model
    for cfg in (plain, late, early):
        train(cfg)
    a, b, c = (load_file(str(tmp_path / n / "last.safetensors")) for n in ("plain", "late", "early"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)  # from step 10 on, the dropouts apply
    with pytest.raises(ConfigError, match="train.dropout_start"):
        toy_config(tmp_path, "bad", dropout_start=-1)


def test_timed_saves_checkpoint_without_validating(tmp_path):
    # a save every 1e-9 minutes: after every step; validation only at the epoch's end
    cfg = toy_config(tmp_path, "timed", max_steps=5, keep_last=3, valid_every=0, save_every_minutes=1e-9)
    train(cfg)
    snaps = sorted(p.name for p in (tmp_path / "timed" / "checkpoints").iterdir())
    assert snaps == [f"step-0000000{k}.safetensors" for k in (3, 4, 5)]
    records = [json.loads(x) for x in (tmp_path / "timed" / "log.jsonl").read_text().splitlines()]
    timed = [r for r in records if r["kind"] == "timed"]
    assert [r["step"] for r in timed] == [1, 2, 3, 4] and not any("bleu" in r for r in timed)  # 5: the final
    assert [r["kind"] for r in records if "valid_loss" in r] == ["final"]  # validated once, at the end
    with pytest.raises(ConfigError, match="save_every_minutes"):
        toy_config(tmp_path, "bad", save_every_minutes=-1)


def test_train_state_patience_learning_rate_and_stopping():
    from rnnsearch.config import TrainConfig
    from rnnsearch.engine.train.state import TrainState

    t = TrainConfig(valid_metric="loss", patience=3, lr_decay=0.5, lr_patience=2, min_lr=0.3,
                    stop_valid_loss=0.5)
    s = TrainState(lr=1.0)
    assert s.after_validation({"valid_loss": 2.0}, t) and s.best == -2.0  # a loss is kept negated
    assert not s.after_validation({"valid_loss": 2.5}, t) and s.lr == 1.0
    assert not s.after_validation({"valid_loss": 2.1}, t) and s.lr == 0.5  # two without improvement
    assert s.stop_reason(t) is None
    assert not s.after_validation({"valid_loss": 2.2}, t)
    assert s.stop_reason(t) == "no improvement in 3 validations"
    assert s.after_validation({"valid_loss": 0.4}, t) and s.bad_validations == 0
    assert "stop_valid_loss=0.5" in s.stop_reason(t)
    for _ in range(4):
        s.after_validation({"valid_loss": 9.0}, t)
    assert s.lr == 0.3  # never below min_lr
    assert TrainState.restored({**s.validation_outcome(), "step": 7, "unknown_key": 1}, lr=1.0).lr == 0.3


def test_valid_metric_chrf_keeps_the_best_chrf_not_the_best_bleu():
    from rnnsearch.engine.train.state import TrainState

    for metric, improved in (("chrf", [True, False, True]), ("bleu", [True, True, False])):
        t, s = TrainConfig(valid_metric=metric), TrainState(lr=1.0)
        records = [{"valid_loss": 2.0, "valid_bleu": 10.0, "valid_chrf": 50.0},
                   {"valid_loss": 1.0, "valid_bleu": 20.0, "valid_chrf": 40.0},  # BLEU up, chrF down
                   {"valid_loss": 3.0, "valid_bleu": 15.0, "valid_chrf": 55.0}]
        assert [s.after_validation(r, t) for r in records] == improved, metric
        assert s.best == (55.0 if metric == "chrf" else 20.0)


def test_training_by_chrf_logs_it_and_saves_the_best_chrf_weights(tmp_path):
    import sacrebleu

    cfg = toy_config(tmp_path, "chrf", max_steps=60, valid_every=20, valid_metric="chrf")
    model_dir = train(cfg)
    records = [json.loads(x) for x in (model_dir / "log.jsonl").read_text().splitlines()]
    valid = [r for r in records if "valid_loss" in r]
    assert len(valid) >= 3 and all("valid_chrf" in r and "valid_bleu" in r for r in valid)  # BLEU logged too
    for k, r in enumerate(valid):  # the best is the highest chrF so far, whatever BLEU and loss do
        assert r["best"] == max(x["valid_chrf"] for x in valid[:k + 1])
    best = valid[-1]["best"]
    src, ref = (open(path).read().splitlines() for path in (cfg.data.valid_src, cfg.data.valid_tgt))
    hyps = rnnsearch.load(model_dir, device="cpu").translate(src, beam=cfg.train.valid_beam)
    assert sacrebleu.corpus_chrf([h.text for h in hyps], [ref]).score == pytest.approx(best)


def test_a_train_state_with_the_former_key_names_restores():
    from rnnsearch.engine.train.state import TrainState

    # a plain run's state as train_state.safetensors held it when the counter towards the next decay
    # was saved as lr_bad, beside the reverse model's keys (None without train.agreement)
    saved = {"step": 7, "epoch": 1, "position": 3, "best": 12.5, "bad_validations": 2, "lr_bad": 1,
             "lr": 0.5, "tokens": 900, "seconds": 4.0, "valid_loss": 1.25, "reverse_valid_loss": None,
             "reverse_best": None}
    state = TrainState.restored(saved, lr=1.0)
    assert state == TrainState(step=7, epoch=1, position=3, best=12.5, bad_validations=2,
                               bad_validations_since_lr_decay=1, lr=0.5, tokens=900, seconds=4.0,
                               valid_loss=1.25)


def test_trainer_steps_can_be_taken_one_at_a_time(tmp_path):
    from rnnsearch.engine.checkpoint import load_train_state
    from rnnsearch.engine.data.parallel import target_tokens
    from rnnsearch.engine.train.state import TrainState
    from rnnsearch.engine.train.trainer import Trainer

    trainer = Trainer(toy_config(tmp_path, "steps", max_steps=3))
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    pairs = trainer.train_data.examples_at(list(range(16)))
    step = trainer.train_step(pairs, epoch=0, pos=0)
    assert step is not None and trainer.state.step == 1 and step.tokens == target_tokens(pairs)
    assert step.sums["loss"][1] == step.tokens and float(step.sums["loss"][0]) > 0
    after = trainer.model.state_dict()
    assert step.grad_norm > 0 and any(not torch.equal(before[k], after[k]) for k in before)
    record: dict = {}
    assert trainer.validate(record) == [True]  # the first validation is the best so far (one model)
    assert {"valid_loss", "valid_ppl", "valid_bleu"} <= set(record)
    assert trainer.state.best == record["valid_bleu"]
    trainer.save_checkpoint("valid", record, improved=[True])
    model_dir = tmp_path / "steps"
    written = {p.name for p in model_dir.iterdir()}
    assert {"model.safetensors", "last.safetensors", "train_state.safetensors"} <= written
    saved = load_train_state(model_dir, trainer.model, trainer.optimizer)
    assert TrainState.restored(saved, lr=0.0) == trainer.state
    assert json.loads((model_dir / "log.jsonl").read_text().splitlines()[-1])["kind"] == "valid"


def test_a_loss_terms_named_sums_and_values_reach_the_log(tmp_path):
    """A term's sums are logged as means over their own tokens, after the loop's keys, its values
    as they are, its validation scores in the validation records; one that adds nothing to the
    objective leaves the weights bitwise those of a plain run."""
    from rnnsearch.engine.train.objective import LossTerm, Part
    from rnnsearch.engine.train.trainer import Trainer

    class Probe(LossTerm):
        def loss(self, trainer, update, out, inputs):
            n = float(update.tokens)  # per target token: 1; per sentence: the mean target length
            return Part(sums={"probe": (torch.tensor(n), update.tokens),
                              "probe_per_pair": (torch.tensor(n), len(update.pairs))},
                        values={"probe_step": float(trainer.state.step)})

        def validation_scores(self, trainer):
            return {"probe_valid": 0.25}

    kw = dict(max_epochs=0, max_steps=12, log_every=4, valid_every=6)
    plain = train(toy_config(tmp_path, "plain", **kw))
    probed = Trainer(toy_config(tmp_path, "probed", **kw), terms=[Probe()]).run()
    a, b = (load_file(str(d / "last.safetensors")) for d in (plain, probed))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    records = [json.loads(x) for x in (probed / "log.jsonl").read_text().splitlines()]
    lines = [r for r in records if r["kind"] == "train"]
    assert [r["step"] for r in lines] == [4, 8, 12]
    for r in lines:
        assert list(r)[-3:] == ["probe", "probe_per_pair", "probe_step"] and list(r)[-4] == "precision"
        assert r["probe"] == 1.0 and r["probe_step"] == r["step"] - 1  # the value before the last update
        assert r["probe_per_pair"] > 1.0  # target tokens per pair: more than one
    validations = [r for r in records if "valid_loss" in r]
    assert len(validations) >= 2 and all(r["probe_valid"] == 0.25 for r in validations)
    plain_lines = [json.loads(x) for x in (plain / "log.jsonl").read_text().splitlines()]
    assert [r["loss"] for r in plain_lines if r["kind"] == "train"] == [r["loss"] for r in lines]


def run_cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "rnnsearch", *args], input=stdin, capture_output=True,
                          text=True, timeout=120)


def test_translate_command_keeps_line_counts_and_writes_attention(reverse_model, tmp_path):
    att = tmp_path / "att.jsonl"
    res = run_cli("translate", "--model", str(reverse_model), "--beam", "3", "--attention", str(att),
                  stdin="w1 w2 w3\n\nw5 w6 w7 w8\n")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.split("\n")
    assert lines == ["w3 w2 w1", "", "w8 w7 w6 w5", ""]
    records = [json.loads(x) for x in att.read_text().splitlines()]
    assert len(records) == 3 and records[1] == {"source": [], "target": [], "weights": []}
    assert records[0]["source"] == ["w1", "w2", "w3"]
    res = run_cli("translate", "--model", str(reverse_model), "--n-best", "2", "--beam", "3", stdin="w1 w2\n")
    rows = [r.split("\t") for r in res.stdout.strip().split("\n")]
    assert len(rows) == 2 and all(r[0] == "0" for r in rows) and float(rows[0][1]) >= float(rows[1][1])


def test_cli_errors_are_one_line(tmp_path):
    res = run_cli("translate", "--model", str(tmp_path / "nowhere"), stdin="a\n")
    assert res.returncode == 2
    assert res.stderr.strip() == f"rnnsearch: error: {tmp_path / 'nowhere'}: no such model directory"
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  hiden: 3\n")
    res = run_cli("train", str(bad))
    assert res.returncode == 2
    assert "unknown key 'model.hiden' (did you mean 'hidden'?)" in res.stderr
    assert "Traceback" not in res.stderr


def test_an_epoch_whose_last_update_is_skipped_still_logs_its_loss(tmp_path, monkeypatch):
    """fp16 loss scaling skips an update that overflows; when that was an epoch's last batch, the
    epoch's training log line (its steps' mean loss) must still be written."""
    import rnnsearch.engine.train.trainer as training

    epoch_sizes, batches, update = [], training.make_batches, Trainer.train_batch

    def make_batches(*args):
        made = batches(*args)
        epoch_sizes.append(len(made))
        return made

    def skip_last(self, batch, epoch, pos):
        done = update(self, batch, epoch, pos)
        return None if pos == epoch_sizes[-1] - 1 else done

    monkeypatch.setattr(training, "make_batches", make_batches)
    monkeypatch.setattr(Trainer, "train_batch", skip_last)
    model_dir = train(toy_config(tmp_path, "skips", max_epochs=2))
    records = [json.loads(x) for x in (model_dir / "log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records if r.get("kind") == "train"] == [0, 1]


@pytest.mark.parametrize("precision,gru", [("bf16", "paper"), ("fp16", "paper"), ("bf16", "cudnn")])
def test_device_mixed_precision_training_runs_and_learns(tmp_path, precision, gru, device):
    """Autocast training (bf16, or fp16 with loss scaling), also with the fused (cuDNN) encoder."""
    # 4 epochs, not 2: some seeds sit on the toy task's plateau (loss ln 10) for the first two
    cfg = toy_config(tmp_path, precision, max_epochs=4, precision=precision, device=str(device))
    cfg.model.gru = gru
    model_dir = train(cfg)
    records = [json.loads(x) for x in (model_dir / "log.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if r.get("kind") == "train"]
    assert all(loss == loss and loss < 10 for loss in losses) and losses[-1] < losses[0]
    assert {r["precision"] for r in records if r.get("kind") == "train"} == {precision}
    # the saved weights stay fp32
    assert all(v.dtype == torch.float32 for v in load_file(str(model_dir / "model.safetensors")).values())


def test_train_compile_runs_the_time_step_compiled(tmp_path, monkeypatch):
    from rnnsearch.engine.accel import speedup as fast
    from rnnsearch.engine.train import trainer

    compiled = []

    def aot_eager(model, **options):  # the default backend needs a C compiler and a minute of CPU
        compiled.append(model)
        fast.compile_time_step(model, backend="aot_eager")

    monkeypatch.setattr(trainer, "compile_time_step", aot_eager)
    model_dir = train(toy_config(tmp_path, "compiled", max_epochs=1, compile=True))
    assert len(compiled) == 1 and compiled[0].teacher_step is not None
    records = [json.loads(x) for x in (model_dir / "log.jsonl").read_text().splitlines()]
    assert [r["loss"] for r in records if r.get("kind") == "train"][-1] < 10
    assert json.loads((model_dir / "config.json").read_text())["train"]["compile"] is True


@pytest.mark.parametrize("optimizer, given, used", [("adam", None, 1e-8), ("adam", 1e-6, 1e-6),
                                                    ("adadelta", None, 1e-6), ("adam", 1e-4, 1e-4)])
def test_optimizer_uses_the_eps_the_config_says(optimizer, given, used, tmp_path):
    from rnnsearch.config import config_from_dict
    from rnnsearch.engine.train.launch import make_optimizer

    train_cfg = {"optimizer": optimizer} if given is None else {"optimizer": optimizer, "eps": given}
    cfg = config_from_dict({"train": train_cfg})
    assert cfg.train.eps == used  # what config.json records ...
    opt = make_optimizer(cfg, [torch.nn.Parameter(torch.zeros(3))])
    assert opt.defaults["eps"] == used  # ... is what the optimizer gets
    cfg.save(tmp_path / "config.json")
    assert json.loads((tmp_path / "config.json").read_text())["train"]["eps"] == used


def test_resume_warns_for_every_setting_it_ignores(tmp_path, caplog):
    cfg = toy_config(tmp_path, "run", max_steps=5, max_epochs=0)
    train(cfg)
    again = toy_config(tmp_path, "run", max_steps=8, max_epochs=0, lr=0.5, batch_size=7)
    again.model.hidden = 64
    with caplog.at_level("WARNING", logger="rnnsearch"):
        train(again, resume=True)
    ignored = sorted(r.getMessage().split()[2].split("=")[0]
                     for r in caplog.records if "ignoring" in r.getMessage())
    assert ignored == ["model.hidden", "train.batch_size", "train.lr"]  # max_steps is taken, not ignored
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["model"]["hidden"] == 32 and saved["train"]["lr"] == 0.01
    assert json.loads((tmp_path / "run" / "DONE").read_text())["step"] == 8


def test_training_stops_at_the_target_validation_loss(tmp_path):
    cfg = toy_config(tmp_path, "target", max_epochs=5, valid_every=10, valid_metric="loss",
                     stop_valid_loss=50.0)
    train(cfg)  # any loss is under 50: the first validation (step 10) ends the run
    done = json.loads((tmp_path / "target" / "DONE").read_text())
    assert done["step"] == 10 and "stop_valid_loss=50.0" in done["reason"]
    records = [json.loads(x) for x in (tmp_path / "target" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r.get("kind") == "valid"] == [10]
    never = toy_config(tmp_path, "never", max_epochs=1, valid_every=10, stop_valid_loss=1e-9)
    train(never)
    assert json.loads((tmp_path / "never" / "DONE").read_text())["reason"] == "max_epochs"


def test_threads_follow_the_free_cores(monkeypatch):
    """train.threads 0 without OMP_NUM_THREADS: a thread a core not busy with other processes."""
    import os

    from rnnsearch.engine.train import launch

    assert 0.0 <= launch.busy_cores(0.05) <= (os.cpu_count() or 1) + 1e-9  # /proc/stat, sampled
    monkeypatch.setattr(launch.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    for load, expected in ((0.1, 4), (1.2, 3), (3.6, 1), (9.0, 1)):
        assert launch.free_cores(load)[0] == expected
    monkeypatch.setattr(launch, "busy_cores", lambda: 0.0)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert launch.free_cores()[0] == 2  # two ranks share the four cores
    before = torch.get_num_threads()
    try:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        launch.seed_and_threads(TrainConfig(threads=0))
        assert torch.get_num_threads() == 2
        launch.seed_and_threads(TrainConfig(threads=1))
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
