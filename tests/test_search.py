"""The product's search (engine/accel/inflight.py, sentences in flight): agreement with the model's
own scores and with a textbook search, batch invariance, n-best. tests/test_accel.py holds it equal to
nn/search.py's plain one."""

import contextlib

import pytest
import torch
from conftest import random_batch, tiny_model

from rnnsearch.config import DecodeConfig, ModelConfig, decode_options
from rnnsearch.engine.accel import inflight as search
from rnnsearch.engine.accel import speedup as fast
from rnnsearch.engine.accel.inflight import beam_search, top_k
from rnnsearch.engine.data.vocab import BOS, EOS, PAD
from rnnsearch.nn.model import build_model
from rnnsearch.nn.search import SearchOptions


def options_of(**decode):
    return SearchOptions(decode_options(DecodeConfig(), decode))


def sequence_log_prob(model, src, mask, tokens):
    """log p(tokens </s> | src) by teacher forcing, for one sentence."""
    tgt_in = torch.tensor([[BOS] + tokens])
    with torch.no_grad():
        lp, _ = model(src, mask, tgt_in)
    gold = tokens + [EOS]
    return float(sum(lp[0, i, w] for i, w in enumerate(gold)))


@contextlib.contextmanager
def watching_steps(model):
    """The previous words (y) of every decoding step of `model` the search takes inside the block
    (accel/speedup.py's ``step``), one tensor per step."""
    seen = []
    real = fast.step
    fast.step = lambda m, enc, state, y, **kw: (seen.append(y.clone()) if m is model else None,
                                                real(m, enc, state, y, **kw))[1]
    try:
        yield seen
    finally:
        fast.step = real


def manual_greedy(model, src, mask, max_steps):
    enc = model.encode(src, mask)
    state, y, out = enc.state, torch.tensor([BOS]), []
    for _ in range(max_steps):
        lp, state, _ = model.step(enc, state, y)
        lp[:, [PAD, BOS]] = float("-inf")  # never generated
        y = lp.argmax(-1)
        if int(y) == EOS:
            break
        out.append(int(y))
    return out


@pytest.mark.parametrize("arch", ["rnnsearch", "rnnencdec"])
def test_beam1_is_argmax_decoding(arch):
    """beam=1 is greedy search: the argmax word at every step of `model.step`."""
    model = tiny_model(arch, double=False, scale=0.8)
    src, mask = random_batch([5, 3, 4], seed=2)
    beam1 = beam_search(model, src, mask, beam=1, alpha=0.0)
    for i, n in enumerate([5, 3, 4]):
        limit = int(n * 2.0) + 10
        expected = manual_greedy(model, src[i:i + 1, :n], mask[i:i + 1, :n], limit)
        assert beam1[i][0].tokens == expected[:limit]


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_beam_scores_are_the_models_log_probabilities(alpha):
    model = tiny_model(double=False, scale=0.8)
    src, mask = random_batch([4, 6], seed=5)
    results = beam_search(model, src, mask, beam=4, alpha=alpha, n_best=4)
    for i, n in enumerate([4, 6]):
        hyps = results[i]
        assert len(hyps) == 4
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        for h in hyps:
            lp = sequence_log_prob(model, src[i:i + 1, :n], mask[i:i + 1, :n], h.tokens)
            assert h.log_prob == pytest.approx(lp, abs=1e-4)
            norm = (len(h.tokens) + 1) ** alpha if alpha else 1.0
            assert h.score == pytest.approx(lp / norm, abs=1e-4)


@pytest.mark.parametrize("arch", ["rnnsearch", "rnnencdec"])
def test_greedy_scores_are_the_models_log_probabilities_and_the_limit_holds(arch):
    model = tiny_model(arch, double=False, scale=0.8, seed=3)
    src, mask = random_batch([4, 6, 2], seed=9)
    short = options_of(beam=1, alpha=1.0, max_len_ratio=0.01)  # 10 words before </s>
    for i, (hyps, capped) in enumerate(zip(beam_search(model, src, mask, beam=1, alpha=1.0),
                                           beam_search(model, src, mask, short))):
        n = [4, 6, 2][i]
        (h,) = hyps
        lp = sequence_log_prob(model, src[i:i + 1, :n], mask[i:i + 1, :n], h.tokens)
        assert h.log_prob == pytest.approx(lp, abs=1e-4)
        assert h.score == pytest.approx(lp / (len(h.tokens) + 1), abs=1e-4)
        assert len(capped[0].tokens) <= 10 and capped[0].tokens == h.tokens[:len(capped[0].tokens)]


def test_beam_finds_at_least_as_good_as_greedy():
    model = tiny_model(double=False, scale=0.8, seed=4)
    src, mask = random_batch([5, 7, 3, 6], seed=8)
    greedy = beam_search(model, src, mask, beam=1, alpha=0.0)
    beam = beam_search(model, src, mask, beam=8, alpha=0.0)
    for g, b in zip(greedy, beam):
        assert b[0].log_prob >= g[0].log_prob - 1e-5


def test_result_does_not_depend_on_the_batch():
    model = tiny_model(double=False, scale=0.8, seed=7)
    lengths = [7, 2, 5, 4, 6]
    src, mask = random_batch(lengths, seed=11)
    together = beam_search(model, src, mask, beam=5, n_best=2)
    for i, n in enumerate(lengths):
        alone = beam_search(model, src[i:i + 1, :n], mask[i:i + 1, :n], beam=5, n_best=2)[0]
        for a, b in zip(alone, together[i]):
            assert a.tokens == b.tokens
            assert a.score == pytest.approx(b.score, abs=1e-5)
    # and in a different grouping
    pair = beam_search(model, src[[3, 0]], mask[[3, 0]], beam=5, n_best=2)
    assert [h.tokens for h in pair[0]] == [h.tokens for h in together[3]]
    assert [h.tokens for h in pair[1]] == [h.tokens for h in together[0]]


def test_device_in_flight_batching_gives_what_decoding_all_at_once_gives(device):
    """With fewer places than sentences, newcomers join while others are still decoding (into a
    batch padded to their longer or shorter sources): every sentence's n-best, scores and
    attention are those of decoding all of them together."""
    model = tiny_model(double=True, scale=0.8, seed=7).to(device)
    lengths = [3, 7, 2, 5, 4, 6, 1]
    src, mask = (x.to(device) for x in random_batch(lengths, seed=12))
    together = beam_search(model, src, mask, beam=3, n_best=2)
    with watching_steps(model) as steps:  # the previous words of each step's rows
        flowing = beam_search(model, src, mask, beam=3, n_best=2, batch_size=2)
    for i, n in enumerate(lengths):
        for a, b in zip(flowing[i], together[i]):
            assert a.tokens == b.tokens
            assert a.score == pytest.approx(b.score, abs=1e-9)
            assert a.log_prob == pytest.approx(b.log_prob, abs=1e-9)
            assert len(a.attention) == len(a.tokens) + 1 and all(len(row) == n for row in a.attention)
            assert a.attention == [pytest.approx(row, abs=1e-12) for row in b.attention]
    assert max(y.numel() for y in steps) == 2 * 3  # never more than two sentences in flight
    # newcomers (rows starting from <s>) joined sentences that were already decoding
    assert sum(bool((y == BOS).any() and (y != BOS).any()) for y in steps) >= 3


def test_in_flight_history_is_dropped_once_no_sentence_needs_it(monkeypatch):
    """The words kept per row reach back only to when the oldest sentence in flight joined,
    however long the stream."""

    model = tiny_model(double=False, scale=0.8, seed=7)
    lengths = [3, 7, 2, 5, 4, 6, 1, 3, 5]
    src, mask = random_batch(lengths, seed=12)
    widths = []
    advance = search._Batch.advance
    monkeypatch.setattr(search._Batch, "advance",
                        lambda self, *a: (advance(self, *a), widths.append(self.seqs.size(1))))
    beam_search(model, src, mask, beam=2, batch_size=2)
    longest = int(max(lengths) * 2.0) + 10 + 1  # a sentence's steps: its limit, then </s>
    assert len(widths) > longest  # the stream ran longer than any one sentence
    assert max(widths) <= longest


def test_translate_in_flight_equals_one_batch(reverse_model):
    import rnnsearch

    model = rnnsearch.load(reverse_model, device="cpu")
    src = ["w3 w14 w1 w15 w9", "w2 w6", "", "w5 w11 w7 w8 w4 w4 w9 w2", "w4", "w9 w9 w3"]
    one = model.translate(src, beam=3, batch_size=64)
    two = model.translate(src, beam=3, batch_size=2)
    assert [t.text for t in two] == [t.text for t in one]
    for a, b in zip(two, one):
        assert a.score == pytest.approx(b.score, abs=1e-6)
        assert a.attention == [pytest.approx(row, abs=1e-6) for row in b.attention]
    assert two[2].text == "" and two[2].attention == []


def test_attention_rows_and_length_limit():
    model = tiny_model(double=False, scale=0.8)
    src, mask = random_batch([3, 5], seed=1)
    res = beam_search(model, src, mask, beam=3, max_len_ratio=0.5)
    for i, n in enumerate([3, 5]):
        h = res[i][0]
        assert len(h.tokens) <= int(n * 0.5) + 10
        assert len(h.attention) == len(h.tokens) + 1  # one row per output token, </s> included
        for row in h.attention:
            assert len(row) == n and sum(row) == pytest.approx(1.0, abs=1e-5)


def test_rnnencdec_hypotheses_have_no_attention():
    model = tiny_model("rnnencdec", double=False)
    src, mask = random_batch([3], seed=1)
    assert beam_search(model, src, mask, beam=2)[0][0].attention is None


@torch.no_grad()
def plain_beam_search(model, src, mask, K, alpha, max_len_ratio=2.0, early_stop_at=None):
    """One sentence, the textbook way: every hypothesis x every word, finished ones set aside.
    early_stop_at=N: stop once the N best of the beam have finished."""
    enc = model.encode(src, mask)
    limit = int(int(mask.sum()) * max_len_ratio) + 10
    beams, done = [([], 0.0, enc.state)], []
    norm = (lambda lp, n: lp / n ** alpha) if alpha else (lambda lp, n: lp)
    for step in range(limit + 1):
        cands = []
        for toks, lp, state in beams:
            y = torch.tensor([toks[-1] if toks else BOS])
            log_p, new_state, _ = model.step(enc, state, y)
            log_p = log_p[0].clone()
            log_p[[PAD, BOS]] = float("-inf")
            if step == limit:  # </s> forced
                cands.append((toks + [EOS], lp + float(log_p[EOS]), new_state))
                continue
            for w in range(log_p.numel()):
                cands.append((toks + [w], lp + float(log_p[w]), new_state))
        # finished hypotheses compete with the growing ones at every step
        pool = [(norm(lp, len(t)), t, lp, s, True) for t, lp, s in done]
        pool += [(norm(lp, len(t)), t, lp, s, False) for t, lp, s in cands]
        pool.sort(key=lambda c: -c[0])
        best = pool[:K]
        done = [(t, lp, s) for _, t, lp, s, fin in best if fin or t[-1] == EOS]
        beams = [(t, lp, s) for _, t, lp, s, fin in best if not fin and t[-1] != EOS]
        if not beams:
            break
        if early_stop_at and all(fin or t[-1] == EOS for _, t, _, _, fin in best[:early_stop_at]):
            break
    return sorted(((norm(lp, len(t)), t[:-1], lp) for t, lp, _ in done), key=lambda c: -c[0])


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_device_batched_beam_search_equals_plain_beam_search(alpha, device):
    """Top-K per hypothesis, K x K per sentence, finished hypotheses skipping the output layer and
    sentences leaving the batch when done give what scoring every word of every hypothesis gives
    (the batched search on the test device, the textbook one on the CPU)."""
    model = tiny_model(double=True, scale=0.7, seed=3)
    on_device = tiny_model(double=True, scale=0.7, seed=3).to(device)
    lengths = [6, 2, 4, 7, 3]
    src, mask = random_batch(lengths, seed=4)
    output_rows = []  # per step: rows through the output layer
    hook = on_device.W_o.register_forward_hook(lambda mod, inp, out: output_rows.append(out.size(0)))
    try:
        with watching_steps(on_device) as steps:
            batched = beam_search(on_device, src.to(device), mask.to(device), beam=3, alpha=alpha, n_best=3)
    finally:
        hook.remove()
    # finished hypotheses skipped the output layer, and the search still equals the textbook one
    assert sum(output_rows) < sum(y.numel() for y in steps)
    for i, n in enumerate(lengths):
        plain = plain_beam_search(model, src[i:i + 1, :n], mask[i:i + 1, :n], 3, alpha)
        assert [h.tokens for h in batched[i]] == [t for _, t, _ in plain]
        assert [h.log_prob for h in batched[i]] == pytest.approx([lp for _, _, lp in plain], abs=1e-5)
    # the sentences really did finish at different steps (so the batch shrank on the way)
    assert len({len(b[0].tokens) for b in batched}) > 1


def test_bf16_decoding_runs_the_output_layer_in_bf16_and_agrees_on_a_trained_model(reverse_model):
    import rnnsearch

    model = rnnsearch.load(reverse_model, device="cpu")
    seen = []
    hook = model.model.W_o.register_forward_hook(lambda mod, inp, out: seen.append(out.dtype))
    # sentences of the kind it learned (words w0-w9, 3-7 of them): where it is confident. Unknown
    # words would leave near-ties that bf16 rounding may break either way (it did on an AMD EPYC).
    src = ["w3 w4 w1 w5 w9", "w2 w6 w5 w1 w7 w8", "w4 w4 w9"]
    fp32 = model.translate(src, beam=3, precision="fp32")
    assert set(seen) == {torch.float32}
    seen.clear()
    bf16 = model.translate(src, beam=3, precision="bf16")
    hook.remove()
    assert set(seen) == {torch.bfloat16}
    assert [t.text for t in bf16] == [t.text for t in fp32]  # a confident model: same translations
    for t in bf16:
        assert all(abs(sum(row) - 1) < 1e-2 for row in t.attention)  # softmaxes still normalise
    with pytest.raises(ValueError, match="precision: expected one of .auto. \\| .fp32. \\| .bf16."):
        model.translate(src, precision="fp16")


@pytest.mark.parametrize("alpha", [0.0, 1.0])
@pytest.mark.parametrize("n_best", [1, 2])
def test_early_stop_equals_the_textbook_search_stopped_the_same_way(alpha, n_best):
    model = tiny_model(double=True, scale=0.7, seed=3)
    with torch.no_grad():
        model.W_o.bias[EOS] += 2.0  # hypotheses end at many different steps
    lengths = [6, 2, 4, 7, 3]
    src, mask = random_batch(lengths, seed=4)
    found, work = {}, {}
    for rule in (True, False, None):  # None: the default, early only where it cannot matter
        with watching_steps(model) as steps:
            found[rule] = beam_search(model, src, mask, beam=3, alpha=alpha, n_best=n_best, early_stop=rule)
        work[rule] = sum(y.numel() for y in steps)  # hypothesis-steps
    early, full = found[True], found[False]
    assert work[True] < work[False]  # sentences really stopped sooner
    assert work[None] == work[True if alpha == 0 else False]
    for i, n in enumerate(lengths):
        plain = plain_beam_search(model, src[i:i + 1, :n], mask[i:i + 1, :n], 3, alpha, early_stop_at=n_best)
        assert [h.tokens for h in early[i]] == [t for _, t, _ in plain[:n_best]]
        assert [h.log_prob for h in early[i]] == pytest.approx([lp for _, _, lp in plain[:n_best]], abs=1e-5)
        if alpha == 0:  # log-probabilities only fall as hypotheses grow: stopping early loses nothing
            assert [h.tokens for h in early[i]] == [h.tokens for h in full[i]]


@pytest.mark.parametrize("arch, score", [
    ("rnnsearch", "additive"), ("rnnsearch", "general"), ("rnnencdec", "additive")])
def test_hypotheses_sharing_one_copy_of_the_encoding_search_as_k_copies_do(arch, score):
    """Beam search keeps one encoder row per sentence, which its K hypotheses attend to together
    (accel/speedup.py's context_terms, its grouped path); a stand-in `step` (CUDA graphs) is handed K copies
    instead. Both must find the same hypotheses, scores and attention, in-flight batching and
    shortlist-free output layer alike."""
    from rnnsearch.engine.accel.inflight import search_stream
    from rnnsearch.nn.search import trim

    model = tiny_model(arch, seed=3, score=score)
    src, mask = random_batch([5, 2, 7, 4, 6, 3, 1], seed=4)
    options = options_of(beam=4, n_best=3, max_len_ratio=1.5)
    calls = []

    def copied_step(enc, state, *a, **k):  # the path a stand-in step is given
        calls.append(enc.src_mask.size(0) == state.size(0))
        return fast.step(model, enc, state, *a, **k)

    def run(step):
        chunks = (trim(src[i:i + 3], mask[i:i + 3]) for i in range(0, 7, 3))
        return dict(search_stream(model, chunks, options, capacity=3, step=step))

    grouped, copied = run(None), run(copied_step)
    assert calls and all(calls)
    assert sorted(grouped) == list(range(7))
    for k in grouped:
        assert [h.tokens for h in grouped[k]] == [h.tokens for h in copied[k]]
        for a, b in zip(grouped[k], copied[k]):
            assert a.score == pytest.approx(b.score, abs=1e-9)
            assert a.log_prob == pytest.approx(b.log_prob, abs=1e-9)
            if a.attention is not None:
                assert torch.allclose(torch.tensor(a.attention), torch.tensor(b.attention), atol=1e-9)


@pytest.mark.parametrize("width", [2048, 8000, 8001, 31999])
@pytest.mark.parametrize("k", [1, 5, 12])
def test_two_stage_top_k_equals_topk(width, k):
    torch.manual_seed(width + k)
    x = torch.randn(37, width).log_softmax(1)
    x[:, :3] = float("-inf")  # <s>, <pad> and friends, as the search masks them
    x[0, -1] = 5.0  # the best value in the last, shorter chunk
    x[1, -k:] = 4.0 + torch.arange(k)  # all k in the last chunk
    x[2] = float("-inf")  # a row with nothing left (a dead hypothesis)
    x[2, 7] = 0.0
    want = x.topk(k, dim=1)
    got = top_k(x, k)
    assert torch.equal(got[0], want[0])  # values: exact, sorted
    assert torch.equal(got[1][[0, 1] + list(range(3, 37))], want[1][[0, 1] + list(range(3, 37))])
    assert got[1][2, 0] == 7  # among equal values (-inf) the other indices may differ


def test_two_stage_top_k_keeps_ties_values_right():
    x = torch.zeros(4, 4096)
    x[:, 100] = 1.0
    values, where = top_k(x, 5)
    assert torch.equal(values, torch.tensor([[1.0, 0, 0, 0, 0]] * 4))
    assert (where[:, 0] == 100).all() and len(set(where[0].tolist())) == 5


def test_beam_search_takes_the_same_words_with_either_top_k(monkeypatch):
    torch.manual_seed(4)
    cfg = ModelConfig(emb=8, hidden=6, align=7, maxout=5, init="paper")
    model = build_model(cfg, 17, 2500)  # wide enough for the two-stage path
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.5)
    model.eval()
    src, mask = random_batch([7, 5, 9, 4])
    chunked = beam_search(model, src, mask, beam=4, n_best=4)
    monkeypatch.setattr(search, "top_k", lambda x, k: x.topk(k, dim=1))
    plain = beam_search(model, src, mask, beam=4, n_best=4)
    assert [[h.tokens for h in hs] for hs in chunked] == [[h.tokens for h in hs] for hs in plain]
    scores = [h.score for hs in plain for h in hs]
    assert [h.score for hs in chunked for h in hs] == pytest.approx(scores, abs=1e-6)


def test_search_options_are_decode_options_checked_once():
    """SearchOptions reads beam, alpha, max_len_ratio and n_best from a config.DecodeConfig, checked
    by the one check (config.decode_options) however it was made; beam_search takes it or keywords."""
    from rnnsearch.config import ConfigError

    assert options_of(beam=3, alpha=0).decode == DecodeConfig(beam=3, alpha=0.0)
    with pytest.raises(ConfigError, match=r"n_best: must be in 1..beam \(2\), got 3"):
        SearchOptions(DecodeConfig(beam=2, n_best=3))
    with pytest.raises(ConfigError, match="beam: must be in 1..256, got 0"):
        options_of(beam=0)
    with pytest.raises(ConfigError, match="bream: not a decoding option"):
        options_of(bream=3)
    model = tiny_model()
    src, mask = random_batch([4, 3])
    via_options = beam_search(model, src, mask, options_of(beam=3, n_best=2))
    via_keywords = beam_search(model, src, mask, beam=3, n_best=2)
    assert [[h.tokens for h in hs] for hs in via_options] == [[h.tokens for h in hs] for hs in via_keywords]
    with pytest.raises(TypeError, match="options or keywords, not both"):
        beam_search(model, src, mask, SearchOptions(), beam=3)
