"""Scoring given translations (engine/decode/scoring.py, `rnnsearch score`): log p(y | x) by teacher
forcing, equal to the literal reference, to the search's own scores, and batch-invariant."""

import json

import numpy as np
import pytest
from conftest import tiny_model

import rnnsearch
from rnnsearch.cli import main
from rnnsearch.config import DecodeConfig
from rnnsearch.engine.decode.scoring import ranked_score, score_pairs
from rnnsearch.nn import reference

SOURCES = ["w3 w4 w1 w5 w9", "w2 w6 w5 w1 w7 w8", "w4 w4 w9", "w1", "w7 w2 w2 w5 w8 w0 w3"]


@pytest.mark.parametrize("arch", ["rnnsearch", "rnnencdec"])
def test_log_probabilities_are_the_literal_references_log_likelihood(arch):
    model = tiny_model(arch, seed=4)
    params = reference.state_dict_to_numpy(model)
    rng = np.random.default_rng(0)
    pairs = [(rng.integers(4, 17, n).tolist(), rng.integers(4, 19, m).tolist())
             for n, m in ((5, 3), (2, 6), (7, 1), (3, 0), (1, 4))]
    scored = score_pairs(model, pairs, batch_size=2, per_token=True)
    for (src, tgt), (lp, tokens, _) in zip(pairs, scored):
        assert lp == pytest.approx(reference.log_likelihood(params, model.cfg, src, tgt), abs=1e-5)
        assert len(tokens) == len(tgt) + 1 and sum(tokens) == pytest.approx(lp, abs=1e-5)


@pytest.mark.parametrize("settings", [dict(beam=5, alpha=1.0), dict(beam=5, alpha=0.0),
                                      dict(beam=1, alpha=0.6), dict(beam=4, alpha=1.0, n_best=4)])
def test_scoring_a_searchs_own_output_gives_its_score(reverse_model, settings):
    model = rnnsearch.load(reverse_model, device="cpu")
    found = model.translate_n_best(SOURCES, precision="fp32", **settings)
    sources = [s for s, hyps in zip(SOURCES, found) for _ in hyps]
    hyps = [h for hs in found for h in hs]
    scores = model.score(sources, [h.text for h in hyps], precision="fp32", alpha=settings["alpha"])
    for h, s in zip(hyps, scores):
        assert s.pieces[:-1] == h.tokens and s.tokens == len(h.tokens) + 1
        assert s.normalised == pytest.approx(h.score, abs=1e-4)
        assert s.per_token == pytest.approx(s.log_prob / s.tokens)


def test_scores_do_not_depend_on_the_batch_and_carry_tokens_and_attention(reverse_model):
    model = rnnsearch.load(reverse_model, device="cpu")
    targets = [" ".join(s.split()[::-1]) for s in SOURCES]
    together = model.score(SOURCES, targets, per_token=True, attention=True, precision="fp32", batch_size=64)
    for s, t, got in zip(SOURCES, targets, together):
        alone = model.score([s], [t], per_token=True, attention=True, precision="fp32", batch_size=1)[0]
        assert got.log_prob == pytest.approx(alone.log_prob, abs=1e-5)
        assert got.token_log_probs == pytest.approx(alone.token_log_probs, abs=1e-5)
        assert got.attention is not None and len(got.attention) == got.tokens
        assert all(abs(sum(row) - 1) < 1e-5 for row in got.attention)
        assert sum(got.token_log_probs) == pytest.approx(got.log_prob, abs=1e-4)
    # the reversal it learned scores far above a sentence left as it is
    kept = model.score(SOURCES, SOURCES, precision="fp32")
    assert sum(s.per_token for s in together) > sum(s.per_token for s in kept) + 1.0
    assert ranked_score(-6.0, 3, None, DecodeConfig(alpha=0.0)) == -6.0
    assert ranked_score(-6.0, 3, None, DecodeConfig(alpha=1.0)) == pytest.approx(-2.0)


def test_score_command_writes_json_lines_and_refuses_mismatched_files(reverse_model, tmp_path, capsys):
    src, tgt, out = tmp_path / "src.txt", tmp_path / "tgt.txt", tmp_path / "scores.jsonl"
    src.write_text("\n".join(SOURCES[:3]) + "\n")
    tgt.write_text("\n".join(" ".join(s.split()[::-1]) for s in SOURCES[:3]) + "\n")
    assert main(["score", "--model", str(reverse_model), "--src", str(src), "--tgt", str(tgt),
                 "--per-token", "--output", str(out), "--precision", "fp32"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3 and rows[0]["pieces"][-1] == "</s>"
    assert set(rows[0]) >= {"source", "target", "log_prob", "per_token", "normalised", "tokens",
                            "token_log_probs"}
    model = rnnsearch.load(reverse_model, device="cpu")
    api = model.score(SOURCES[:1], [rows[0]["target"]], precision="fp32")
    assert rows[0]["log_prob"] == pytest.approx(api[0].log_prob, abs=1e-6)
    tgt.write_text("only one line\n")
    assert main(["score", "--model", str(reverse_model), "--src", str(src), "--tgt", str(tgt)]) == 2
    err = capsys.readouterr().err
    assert f"{src} has 3 lines but {tgt} has 1" in err and "Traceback" not in err
    assert main(["score", "--model", str(reverse_model), "--src", str(src), "--tgt", str(src),
                 "--alpha", "-1"]) == 2
    assert "--alpha" in capsys.readouterr().err
