"""engine/accel/graphs.py: decoding steps on padded static buffers (replayed from CUDA graphs on a GPU)
give what model.step gives. On a CPU the padding runs eagerly; `RNNSEARCH_TEST_DEVICE=cuda
pytest -k device` captures and replays real graphs."""

import pytest
import torch
from conftest import random_batch, tiny_model

import rnnsearch
from rnnsearch.config import ConfigError, DecodeConfig, decode_options
from rnnsearch.engine.accel import speedup as fast
from rnnsearch.engine.accel.graphs import GraphedStep, row_bucket, width_bucket
from rnnsearch.engine.accel.inflight import search_stream
from rnnsearch.engine.decode.translator import Translator
from rnnsearch.nn.model import BOS
from rnnsearch.nn.search import SearchOptions, trim


def test_buckets():
    assert [row_bucket(n) for n in (1, 2, 3, 5, 33, 64, 65, 130, 640)] == [1, 2, 4, 8, 64, 64, 128, 192, 640]
    assert [width_bucket(n) for n in (1, 16, 17, 50)] == [16, 16, 32, 64]


@pytest.mark.parametrize("arch", ["rnnsearch", "rnnencdec"])
def test_device_padded_step_equals_the_model_step(arch, device):
    model = tiny_model(arch=arch, double=True, scale=0.8, seed=3).to(device)
    src, mask = (x.to(device) for x in random_batch([5, 2, 7], seed=4))
    enc = model.encode(src, mask)
    state, y = enc.state, torch.tensor([BOS, 5, 9], device=device)
    step = GraphedStep(model, capture=device.type == "cuda")
    for rows in (None, torch.tensor([0, 2], device=device)):
        want = fast.step(model, enc, state, y, rows=rows)
        for _ in range(2):  # the second call replays what the first recorded
            got = step(enc, state, y, rows=rows)
            for a, b in zip(got, want):
                if b is None:
                    assert a is None
                else:
                    assert a.shape == b.shape and torch.allclose(a, b, atol=1e-12), arch
    assert list(step.graphs) == [(4, 16, None)]  # 3 rows -> 4, 7 positions -> 16: one graph, reused
    if arch == "rnnsearch":
        # row 1 has 2 words: the positions after them (real padding, then the bucket's) weigh 0
        assert torch.equal(got[2][1, 2:], torch.zeros(5, dtype=got[2].dtype, device=device))


def test_device_search_through_graphs_equals_the_plain_search(device):
    """In-flight batching changes the rows and the source width from step to step: each change
    picks (or records) its bucket's graph, and every hypothesis is the plain search's."""
    model = tiny_model(double=True, scale=0.8, seed=7).to(device)
    lengths = [3, 7, 2, 5, 4, 6, 1, 9, 3]
    src, mask = (x.to(device) for x in random_batch(lengths, seed=12))
    chunks = lambda: (trim(src[i:i + 3], mask[i:i + 3]) for i in range(0, len(lengths), 3))  # noqa: E731
    options = SearchOptions(decode_options(DecodeConfig(), dict(beam=3, alpha=1.0, n_best=2)))
    plain = dict(search_stream(model, chunks(), options, capacity=4))
    step = GraphedStep(model, capture=device.type == "cuda")
    graphed = dict(search_stream(model, chunks(), options, capacity=4, step=step))
    assert sorted(graphed) == list(range(len(lengths)))
    for k in plain:
        for a, b in zip(graphed[k], plain[k]):
            assert a.tokens == b.tokens
            assert a.score == pytest.approx(b.score, abs=1e-9)
            assert a.attention == [pytest.approx(row, abs=1e-12) for row in b.attention]
    assert len(step.graphs) >= 2  # the batch shrank and grew through more than one bucket


def test_translator_with_graphs_translates_as_without(reverse_model):
    plain = rnnsearch.load(reverse_model, device="cpu")
    padded = Translator(plain.cfg, plain.model, plain.src_tok, plain.tgt_tok, plain.device,
                        graphs=GraphedStep(plain.model, capture=False))  # the graphs' padding, eagerly
    sources = ["w1 w2 w3", "w4 w5 w6 w7 w8", "", "w2"]
    for beam in (1, 3):
        a = plain.translate(sources, beam=beam)
        b = padded.translate(sources, beam=beam)
        assert [t.tokens for t in a] == [t.tokens for t in b]
        assert [t.score for t in a] == pytest.approx([t.score for t in b], abs=1e-5)
    assert padded.graphs is not None and padded.graphs.graphs


def test_cuda_graphs_need_a_gpu(reverse_model, tmp_path, capsys):
    from rnnsearch.cli import main

    with pytest.raises(ConfigError, match="--cuda-graphs needs a CUDA device"):
        rnnsearch.load(reverse_model, device="cpu", cuda_graphs=True)
    (tmp_path / "in.txt").write_text("w1 w2\n")
    assert main(["translate", "--model", str(reverse_model), "--device", "cpu", "--cuda-graphs",
                 "--input", str(tmp_path / "in.txt")]) == 2
    assert "needs a CUDA device" in capsys.readouterr().err
    model = tiny_model(double=False)
    with pytest.raises(ValueError, match="need the model on a CUDA device"):
        GraphedStep(model, capture=True)
