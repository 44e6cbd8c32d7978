"""--quantize int8: int8 products close to fp32, the model directory untouched, the commands."""

import hashlib
import json

import pytest
import torch
from conftest import random_batch, tiny_model
from torch import nn

import rnnsearch
from rnnsearch.cli import main
from rnnsearch.engine.accel import quantize as quantize
from rnnsearch.engine.accel.quantize import Int8Linear, int8_engine, quantize_int8_
from rnnsearch.nn.search import beam_search


def test_int8_linear_is_close_to_the_fp32_product():
    torch.manual_seed(0)
    lin = nn.Linear(64, 40)
    x = torch.randn(3, 5, 64)
    q = Int8Linear.of(lin)
    want = lin(x)
    got = q(x)
    assert got.shape == want.shape and got.dtype == torch.float32
    # 8-bit weights, 7-bit activations: a few percent of the output's scale, never more
    err = (got - want).abs().max() / want.abs().max()
    assert 0 < err < 0.05
    no_bias = Int8Linear(lin.weight, None)
    assert torch.allclose(no_bias(x) + lin.bias, got, atol=1e-5)


def test_the_output_layers_rows_are_its_int8_weights_dequantised():
    """A shortlist multiplies by a few rows of W_o; an int8 model keeps int8 rows and scales for
    that, not an fp32 copy: each row within half its scale step of the fp32 row, biases exact."""
    lin = nn.Linear(32, 50)
    ids = torch.tensor([0, 7, 49, 7])
    output = quantize.Int8Output(lin.weight, lin.bias)
    weight, bias = output.rows(ids)
    step = lin.weight.abs().amax(1, keepdim=True)[ids] / 127
    assert weight.dtype == torch.float32 and weight.shape == (4, 32)
    assert ((weight - lin.weight[ids]).abs() <= step / 2 + 1e-7).all()
    assert torch.equal(weight[1], weight[3]) and torch.equal(bias, lin.bias[ids])
    assert ((weight / step).round() - weight / step).abs().max() < 1e-3  # on the int8 grid
    x = torch.randn(3, 32)  # over the whole vocabulary: the int8 product, as any Int8Linear's
    assert torch.equal(output(x), Int8Linear.of(lin)(x))


def simulate_cpu(monkeypatch, flags):
    monkeypatch.setattr(quantize, "cpu_info", lambda: ("Test CPU", set(flags)))
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)


@pytest.mark.parametrize("flags", [{"avx2"}, {"avx2", "avx512_vnni"}, {"avx2", "amx_int8", "amx_tile"}])
def test_the_int8_engine_is_onednn_with_8_bit_activations_only_on_amx(monkeypatch, flags):
    simulate_cpu(monkeypatch, flags)
    monkeypatch.delenv("RNNSEARCH_INT8_ENGINE", raising=False)
    engine, reduce_range = int8_engine()
    if "amx_int8" in flags and "onednn" in torch.backends.quantized.supported_engines:
        assert (engine, reduce_range) == ("onednn", False)
    else:
        assert (engine, reduce_range) == (torch.backends.quantized.engine, True)
    default = torch.backends.quantized.engine
    Int8Linear.of(nn.Linear(8, 4))
    assert torch.backends.quantized.engine == default  # packing leaves the global engine as it was


@pytest.mark.parametrize("cap, amx", [(None, True), ("DEFAULT", True), ("avx512_core_amx", True),
                                      ("AVX512_CORE_VNNI", False), ("AVX2", False)])
def test_onednn_capped_below_amx_is_given_7_bit_activations(monkeypatch, cap, amx):
    """oneDNN's own ISA cap (ONEDNN_MAX_CPU_ISA) below AMX makes an AMX CPU run the AVX2 kernels,
    which saturate 8-bit activations: the product then cuts them to 7 bits, as on an AVX2 CPU,
    even with oneDNN asked for by name."""
    simulate_cpu(monkeypatch, {"avx2", "amx_int8", "amx_tile"})
    if cap is not None:
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
    assert quantize.onednn_runs_amx() == amx
    if "onednn" in torch.backends.quantized.supported_engines:
        monkeypatch.setenv("RNNSEARCH_INT8_ENGINE", "onednn")
        assert int8_engine() == ("onednn", not amx)


@pytest.mark.skipif("onednn" not in torch.backends.quantized.supported_engines, reason="no oneDNN engine")
@pytest.mark.parametrize("rows", [1, 3, 32, 45])
def test_onednn_products_pad_rows_to_32_and_give_each_row_its_own_result(monkeypatch, rows):
    """The real oneDNN kernels of this CPU, nothing simulated: AMX tiles with 8-bit activations
    where oneDNN runs them, else the AVX2/AVX-512 kernels with 7-bit ones (8 bits saturate there)."""
    monkeypatch.setenv("RNNSEARCH_INT8_ENGINE", "onednn")
    torch.manual_seed(rows)
    lin = nn.Linear(64, 40)
    q = Int8Linear.of(lin)
    eight_bits = quantize.onednn_runs_amx()
    assert (q.engine, q.reduce_range) == ("onednn", not eight_bits)
    x = torch.randn(rows, 64)
    seen, kernel = [], torch.ops.quantized.linear_dynamic
    monkeypatch.setattr(torch.ops.quantized, "linear_dynamic", lambda a, *rest, **kw: seen.append(a.size(0))
                        or kernel(a, *rest, **kw))
    got = q(x)
    assert seen == [-(-rows // 32) * 32]  # oneDNN sees a multiple of 32 rows: one kernel per 32
    monkeypatch.undo()
    # the same product without the zero rows: padding changes nothing (the range keeps 0 anyway)
    want = torch.ops.quantized.linear_dynamic(x, q._packed, reduce_range=q.reduce_range)
    assert got.shape == (rows, 40) and torch.allclose(got, want, atol=1e-6)
    # 8-bit activations (AMX) halve the error bound of 7-bit ones
    err = (got - lin(x)).abs().max() / lin(x).abs().max()
    assert 0 < err < (0.03 if eight_bits else 0.05)


@pytest.mark.parametrize("options", [{}, {"gru": "cudnn"}, {"score": "general"}, {"arch": "rnnencdec"}])
def test_int8_step_is_close_to_fp32(options):
    fp32 = tiny_model(seed=2, double=False, scale=0.3, emb=16, hidden=24, align=20, maxout=12, **options)
    int8 = tiny_model(seed=2, double=False, scale=0.3, emb=16, hidden=24, align=20, maxout=12, **options)
    quantize_int8_(int8)
    src, mask = random_batch([6, 4, 5])
    y = torch.tensor([3, 4, 5])
    with torch.no_grad():
        enc = fp32.encode(src, mask)
        lp, s, alpha = fp32.step(enc, enc.state, y)
        lq, sq, alpha_q = int8.step(int8.encode(src, mask), enc.state, y)
    assert not torch.equal(lp, lq)  # the products really are int8 ones
    assert (lp.exp() - lq.exp()).abs().max() < 0.02 and (s - sq).abs().max() < 0.02
    if alpha is not None:
        assert (alpha - alpha_q).abs().max() < 0.02 and torch.allclose(alpha_q.sum(-1), torch.ones(3))
    # the encoder and the attention keys stay fp32: identical annotations
    assert torch.equal(int8.encode(src, mask).state, enc.state)
    # beam search runs through the swapped modules, teacher forcing too
    with torch.no_grad():
        hyps = beam_search(int8, src, mask, beam=3)
        int8(src, mask, torch.tensor([[1, 3, 4]] * 3))
    assert len(hyps) == 3


def digests(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir() if p.is_file()}


def test_load_int8_translates_like_fp32_and_leaves_the_files(reverse_model, tmp_path):
    before = digests(reverse_model)
    fp32 = rnnsearch.load(reverse_model, device="cpu")
    int8 = rnnsearch.load(reverse_model, device="cpu", quantize="int8")
    assert int8.quantized == "int8" and int8.precision.resolve("bf16") == "fp32"
    assert int8.parameters == fp32.parameters  # /info reports the model's size, not what stayed fp32
    lines = [" ".join(f"w{(k * 7 + i) % 10}" for i in range(3 + k % 5)) for k in range(40)]
    a = [t.text for t in fp32.translate(lines, beam=3)]
    b = [t.text for t in int8.translate(lines, beam=3)]
    assert sum(x == y for x, y in zip(a, b)) >= 36  # a rare near-tie may flip; the task is learned
    assert digests(reverse_model) == before
    with pytest.raises(ValueError, match="quantize must be one of none, int8"):
        rnnsearch.load(reverse_model, device="cpu", quantize="int4")


def test_quantize_refuses_a_gpu_model(reverse_model, monkeypatch):
    from rnnsearch.engine.decode import loading

    monkeypatch.setattr(loading, "resolve_device", lambda device: torch.device("cuda"))
    with pytest.raises(ValueError, match="decodes on the CPU"):
        rnnsearch.load(reverse_model, device="cuda", quantize="int8")


def test_translate_and_evaluate_commands_take_quantize(reverse_model, tmp_path, capsys):
    src = tmp_path / "src.txt"
    src.write_text("w1 w2 w3\nw4 w5 w6 w7\n")
    out = tmp_path / "out.txt"
    assert main(["translate", "--model", str(reverse_model), "--input", str(src), "--output", str(out),
                 "--device", "cpu", "--quantize", "int8"]) == 0
    assert out.read_text().splitlines() == ["w3 w2 w1", "w7 w6 w5 w4"]
    ref = tmp_path / "ref.txt"
    ref.write_text("w3 w2 w1\nw7 w6 w5 w4\n")
    capsys.readouterr()
    assert main(["evaluate", "--model", str(reverse_model), "--src", str(src), "--ref", str(ref),
                 "--device", "cpu", "--quantize", "int8"]) == 0
    report = json.loads(capsys.readouterr().out)
    system = report["systems"][0] if "systems" in report else report
    assert system["quantize"] == "int8" and system["bleu"] == 100.0
