"""`rnnsearch demo` at a toy budget: every output is written and the figures are reported."""

import json

from rnnsearch.tools.demo import EXAMPLE, run_demo


def test_demo_runs_end_to_end_at_a_toy_budget(tmp_path):
    out = tmp_path / "demo"
    r = run_demo(out, seed=3, n_train=300, steps=7, progress=False,  # a step budget: 5 batches an epoch
                 overrides=["train.threads=1", "data.valid_bleu_sentences=20"])
    assert r["steps"] == 7 == json.loads((out / "model" / "DONE").read_text())["step"]
    assert set(r["checks"]) == {"test_bleu >= 95", "new compositions exact", "content words >= 75%",
                                "AER <= 0.33", "昨天/吃/苹果 on yesterday/ate/apple"}
    assert json.loads((out / "results.json").read_text(encoding="utf-8"))["checks"] == r["checks"]
    for name in ("attention.png", "explorer.html", "attention.json", "results.json",
                 "model/model.safetensors", "data/train.en", "data/train.zh", "data/train.align",
                 "data/test.roles"):
        assert (out / name).exists(), name
    att = json.loads((out / "attention.json").read_text(encoding="utf-8"))
    assert " ".join(att["source"]) == EXAMPLE
    assert att["target"] == "我 昨天 吃 了 一 个 苹果 。".split() + ["</s>"]
    assert len(att["weights"]) == 9 and all(abs(sum(row) - 1) < 1e-5 for row in att["weights"])
    for key in ("test_bleu", "aer", "content_word_accuracy", "example_argmax", "bleu_signature"):
        assert key in r
    assert 0.0 <= r["aer"] <= 1.0 and 0.0 <= r["content_word_accuracy"] <= 1.0
    assert "tok:zh" in r["bleu_signature"]
    assert (out / "attention.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # train, valid and test sentences never overlap
    train = set((out / "data/train.en").read_text(encoding="utf-8").splitlines())
    test = set((out / "data/test.en").read_text(encoding="utf-8").splitlines())
    assert not train & test and EXAMPLE not in train
