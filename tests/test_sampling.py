"""Sampling (engine/decode/sampling.py, ``translate --sample``): draws follow the model's own
probabilities (reshaped by temperature, top-k, top-p), are reproducible, and score as the model
scores them."""

import pytest
import torch
from conftest import random_batch, tiny_model

import rnnsearch
from rnnsearch.cli import main
from rnnsearch.config import ConfigError, DecodeConfig, decode_options
from rnnsearch.engine.decode.sampling import reshape, sample
from rnnsearch.engine.decode.scoring import score_pairs
from rnnsearch.nn.model import BOS, EOS, PAD

DRAWS = 6000


def first_words(model, src, mask, seed=0, **options):
    """The first words of 6,000 draws: 30 copies of the one source in a batch, 200 samples each."""
    d = decode_options(DecodeConfig(), dict(sample=DRAWS // 30, **options))
    hyps = [h for hs in sample(model, src.repeat(30, 1), mask.repeat(30, 1), d,
                               torch.Generator().manual_seed(seed)) for h in hs]
    first = torch.tensor([h.tokens[0] if h.tokens else EOS for h in hyps])
    return torch.bincount(first, minlength=19).float() / DRAWS, hyps


def model_first_word(model, src, mask):
    with torch.no_grad():
        log_p, _, _ = model.step(model.encode(src, mask), model.encode(src, mask).state, torch.tensor([BOS]))
    log_p = log_p[0].float()
    log_p[[BOS, PAD]] = float("-inf")
    return log_p


@pytest.mark.parametrize("seed", [0, 5])
@pytest.mark.parametrize("options", [{}, {"temperature": 0.5}, {"temperature": 2.0}, {"top_k": 3},
                                     {"top_p": 0.6}])
def test_the_first_word_is_drawn_from_the_models_reshaped_distribution(seed, options):
    """Over 6,000 draws the frequencies of the first word are the model's probabilities after
    temperature, top-k or top-p (4 standard deviations at most), and nothing outside them."""
    model = tiny_model(seed=seed, scale=0.4, double=False)
    src, mask = random_batch([5], seed=seed)
    want = reshape(model_first_word(model, src, mask).unsqueeze(0), **options)[0]
    got, _ = first_words(model, src, mask, seed=seed, **options)
    sd = (want * (1 - want) / DRAWS).sqrt()
    assert ((got - want).abs() <= 4 * sd + 1e-3).all(), (got, want)
    assert (got[want == 0] == 0).all()
    if options.get("top_k"):
        assert int((want > 0).sum()) == options["top_k"]
    if options.get("top_p"):  # the smallest set reaching the mass: without its last word it falls short
        p = torch.softmax(model_first_word(model, src, mask), -1)
        kept = p[want > 0].sort(descending=True).values
        assert kept.sum() >= options["top_p"] - 1e-6 and kept[:-1].sum() < options["top_p"]


def test_samples_score_as_the_model_scores_them_and_are_reproducible():
    model = tiny_model(seed=2, scale=0.4, double=False)
    src, mask = random_batch([5, 3, 6], seed=1)
    d = decode_options(DecodeConfig(), dict(sample=4, alpha=1.0, max_len_ratio=0.5))
    drawn = sample(model, src, mask, d, torch.Generator().manual_seed(7))
    again = sample(model, src, mask, d, torch.Generator().manual_seed(7))
    other = sample(model, src, mask, d, torch.Generator().manual_seed(8))
    tokens = lambda out: [[h.tokens for h in hs] for hs in out]  # noqa: E731
    assert tokens(drawn) == tokens(again) and tokens(drawn) != tokens(other)
    pairs = [(src[b][mask[b]].tolist(), h.tokens) for b, hs in enumerate(drawn) for h in hs]
    scored = score_pairs(model, pairs)
    for h, (lp, _, _) in zip([h for hs in drawn for h in hs], scored):
        assert h.log_prob == pytest.approx(lp, abs=1e-4)
        assert h.score == pytest.approx(lp / (len(h.tokens) + 1), abs=1e-4)
        assert h.attention is not None and len(h.attention) == len(h.tokens) + 1
    limits = [int(n * 0.5) + 10 for n in (5, 3, 6)]
    assert all(len(h.tokens) <= limits[b] for b, hs in enumerate(drawn) for h in hs)


def test_translate_samples_n_translations_a_line_and_refuses_bad_options(reverse_model, tmp_path, capsys):
    model = rnnsearch.load(reverse_model, device="cpu")
    lines = ["w3 w4 w1 w5 w9", "w2 w6"]
    drawn = model.translate_n_best(lines, sample=5, seed=3, temperature=1.5)
    assert [len(s) for s in drawn] == [5, 5]
    assert drawn == model.translate_n_best(lines, sample=5, seed=3, temperature=1.5)
    with pytest.raises(ConfigError, match="temperature: must be > 0"):
        model.translate(lines, sample=1, temperature=0.0)
    with pytest.raises(ConfigError, match="sample: translate gives one translation a sentence, got 5"):
        model.translate(lines, sample=5)
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n")
    assert main(["translate", "--model", str(reverse_model), "--input", str(src), "--sample", "3",
                 "--top-k", "2", "--seed", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 6 and [line.split("\t")[0] for line in out] == ["0"] * 3 + ["1"] * 3
    assert main(["translate", "--model", str(reverse_model), "--input", str(src), "--sample", "2",
                 "--top-p", "1.5"]) == 2
    assert "--top-p: must be in (0, 1]" in capsys.readouterr().err
