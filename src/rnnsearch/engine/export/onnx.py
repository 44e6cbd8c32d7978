"""ONNX export (``rnnsearch export --format onnx``): a model as two graphs any ONNX runtime runs.

    encoder.onnx   src (B, S) int64, src_mask (B, S) bool
                   -> annotations (B, S, 2n), keys (B, S, ·), state s_0 (B, n)      RNNsearch
                   -> context c (B, n), state s_0 (B, n)                             RNNencdec
    step.onnx      y_prev (R,), state (R, n), annotations, keys, src_mask (R, S, ·) (RNNencdec: context)
                   -> log_p (R, V), new_state (R, n), alpha (R, S) (RNNencdec: no alpha)
    manifest.json  what a decoder needs besides: the special ids, the tokeniser files and kind,
                   reverse_source, lowercase, the decoding defaults, the model's configuration
    src/tgt tokeniser files, as the model directory has them

Every axis named B, S or R is dynamic. The encoder is written node by node here (onnx.helper):
its two GRU directions are one ONNX ``GRU`` op (direction bidirectional, per-sentence lengths),
because the exporters of torch 2.13 lose a Python time loop's length (the dynamo exporter
silently fixes it at the example's: the probe in the project's notes). ONNX orders a GRU's gates
z, r, h where nn/gru.py has r, z, h̃, and its z weighs the old state where the paper's weighs the
new one: so z's rows enter negated (σ(−a) = 1 − σ(a)); ``linear_before_reset`` 0 is the paper's
form, 1 the cudnn form. The decoder step is the model's own ``step``, through torch.onnx's dynamo
exporter. Because exporters can be wrong without a word, :func:`export_onnx` runs both graphs
against PyTorch at several batch sizes and source lengths (one word to the length limit) and
writes nothing if any output differs.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from rnnsearch.config import ConfigError
from rnnsearch.engine.checkpoint import load_model_dir
from rnnsearch.engine.data.vocab import tokenizer_files
from rnnsearch.nn.model import BOS, EOS, PAD, UNK, Encoded, RNNsearch

FORMAT = 1  # manifest.json's "format": what the runtime checks it can read
ENCODER, STEP, MANIFEST = "encoder.onnx", "step.onnx", "manifest.json"
OPSET = 18
IR_VERSION = 10  # the file format torch's exporter writes the step in; onnxruntime-web 1.31 reads up to 13
TOLERANCE = {"annotations": 1e-4, "keys": 1e-4, "context": 1e-4, "state": 1e-4, "log_p": 1e-3,
             "new_state": 1e-4, "alpha": 1e-4}


class ExportError(ConfigError):
    """The exported graphs compute something else than the model: nothing was written."""


def export_onnx(model_dir: str | Path, out: str | Path, check_lengths: tuple[int, ...] = (),
                quantize: str = "none") -> dict:
    """Write `model_dir`'s model to the new folder `out` (encoder.onnx, step.onnx, the tokeniser
    files, manifest.json), checked against PyTorch first; returns the manifest. A folder that
    exists, or graphs that differ from the model, are a ConfigError and leave nothing behind.
    `quantize` "int8": the checked graphs' matrix products then quantised (:func:`quantize_int8`)."""
    import onnx

    if quantize not in ("none", "int8"):
        raise ConfigError(f"export: --quantize must be none or int8, got {quantize!r}")
    out = Path(out)
    if out.exists():
        raise ConfigError(f"{out} exists: export writes a new folder (remove it or choose another)")
    cfg, model, src_tok, tgt_tok = load_model_dir(model_dir, "cpu")
    model.float().eval()
    manifest = _manifest(cfg, model, len(src_tok), len(tgt_tok))
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.", dir=out.parent) as tmp:
        folder = Path(tmp)
        onnx.save(encoder_graph(model), folder / ENCODER)
        _export_step(model, folder / STEP)
        for name in dict.fromkeys(tokenizer_files(cfg.vocab.kind, cfg.vocab.joint)):
            shutil.copyfile(Path(model_dir) / name, folder / name)
        lengths = check_lengths or (1, 2, 7, max(8, min(cfg.data.max_len, 100)))
        manifest["checked"] = check(model, folder, lengths)
        manifest["quantize"] = quantize
        if quantize == "int8":
            quantize_int8(folder / ENCODER, folder / STEP)
        text = json.dumps(manifest, indent=1, ensure_ascii=False) + "\n"
        (folder / MANIFEST).write_text(text, encoding="utf-8")
        umask = os.umask(0)
        os.umask(umask)
        folder.chmod(0o777 & ~umask)  # a temporary folder is private; the export is not
        folder.rename(out)
        folder.mkdir()  # for TemporaryDirectory's cleanup
    return manifest


def _manifest(cfg, model, src_vocab: int, tgt_vocab: int) -> dict:
    src_name, tgt_name = tokenizer_files(cfg.vocab.kind, cfg.vocab.joint)
    return {"format": FORMAT, "arch": cfg.model.arch, "hidden": cfg.model.hidden,
            "ids": {"pad": PAD, "unk": UNK, "bos": BOS, "eos": EOS},
            "tokenizer": {"kind": "word" if cfg.vocab.kind == "word" else "sentencepiece",
                          "source": src_name, "target": tgt_name, "source_size": src_vocab,
                          "target_size": tgt_vocab},
            "reverse_source": cfg.data.reverse_source, "lowercase": cfg.data.lowercase,
            "decode": {k: getattr(cfg.decode, k) for k in ("beam", "alpha", "max_len_ratio", "max_source_len",
                                                           "n_best", "length_penalty")},
            "encoder": ENCODER, "step": STEP, "opset": OPSET,
            "config": {"model": cfg.model.__dict__.copy(), "vocab": cfg.vocab.__dict__.copy(),
                       # the training files name the languages (serve); the shift reads links (Translation)
                       "data": {k: getattr(cfg.data, k) for k in ("train_src", "train_tgt", "train_tsv")},
                       "train": {"guided_alignment_shift": cfg.train.guided_alignment_shift}}}


# -- the encoder, node by node ---------------------------------------------------------------------
def _onnx_gru_weights(grus) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ONNX GRU's W (D, 3n, m), R (D, 3n, n), B (D, 6n) from nn/gru.py's GRUs (one a direction)."""
    Ws, Rs, Bs = [], [], []
    for gru in grus:
        n = gru.hidden
        w, b = gru.W.weight.detach().numpy(), gru.W.bias.detach().numpy()
        u = gru.U.weight.detach().numpy()
        bu = gru.U.bias.detach().numpy() if gru.U.bias is not None else np.zeros(3 * n, np.float32)
        zrh = functools.partial(_zrh, n=n)

        Ws.append(zrh(w))
        Rs.append(zrh(u))
        Bs.append(np.concatenate([zrh(b), zrh(bu)]))
    return (np.stack(Ws).astype(np.float32), np.stack(Rs).astype(np.float32), np.stack(Bs).astype(np.float32))


def _zrh(m: np.ndarray, n: int) -> np.ndarray:
    """Our [r, z, h] rows as ONNX's [z, r, h], z negated."""
    return np.concatenate([-m[n:2 * n], m[:n], m[2 * n:]])


class _Graph:
    """An ONNX graph written node by node: its nodes and its constants (initializers)."""

    def __init__(self):
        self.nodes: list = []
        self.inits: list = []

    def const(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op: str, inputs: list[str], outputs: list[str], **attrs) -> list[str]:
        from onnx import helper

        self.nodes.append(helper.make_node(op, inputs, outputs, **attrs))
        return outputs

    def linear(self, x: str, layer: nn.Linear, name: str) -> str:
        """x Wᵀ + b as MatMul and Add (what onnxruntime's dynamic quantisation rewrites)."""
        weight = self.const(f"{name}.weight_t", layer.weight.detach().numpy().T.copy())
        (y,) = self.node("MatMul", [x, weight], [f"{name}_mm"])
        if layer.bias is None:
            return y
        bias = self.const(f"{name}.bias", layer.bias.detach().numpy())
        return self.node("Add", [y, bias], [f"{name}_out"])[0]


def encoder_graph(model) -> Any:
    """The encoder of `model` (RNNsearch or RNNencdec, either GRU form) as an ONNX model."""
    from onnx import TensorProto, helper

    g, n, rnnsearch = _Graph(), model.cfg.hidden, isinstance(model, RNNsearch)
    g.node("Gather", [g.const("src_emb", model.src_emb.weight.detach().numpy()), "src"], ["emb"])
    g.node("Transpose", ["emb"], ["x"], perm=[1, 0, 2])  # (S, B, m)
    g.node("Cast", ["src_mask"], ["mask_i64"], to=TensorProto.INT64)
    g.node("ReduceSum", ["mask_i64", g.const("axis1", np.array([1], np.int64))], ["lens64"], keepdims=0)
    g.node("Cast", ["lens64"], ["lens"], to=TensorProto.INT32)
    W, R, B = _onnx_gru_weights([model.enc_fwd, model.enc_bwd] if rnnsearch else [model.enc_fwd])
    g.node("GRU", ["x", g.const("gru_W", W), g.const("gru_R", R), g.const("gru_B", B), "lens"], ["Y", "Y_h"],
           hidden_size=n, direction="bidirectional" if rnnsearch else "forward",
           linear_before_reset=int(model.cfg.gru == "cudnn"))
    outputs = _annotations(g, model) if rnnsearch else _fixed_context(g, model)
    graph = helper.make_graph(
        g.nodes, "rnnsearch_encoder",
        [helper.make_tensor_value_info("src", TensorProto.INT64, ["B", "S"]),
         helper.make_tensor_value_info("src_mask", TensorProto.BOOL, ["B", "S"])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in outputs], g.inits)
    # onnx's default IR version (14 in onnx 1.23) is newer than onnxruntime-web reads
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="rnnsearch",
                             ir_version=IR_VERSION)


def _annotations(g: _Graph, model) -> list[tuple[str, list]]:
    """RNNsearch's outputs from the GRU's Y (S, 2, B, n) and Y_h: h_j, their keys, s_0."""
    from onnx import TensorProto

    n = model.cfg.hidden
    g.node("Transpose", ["Y"], ["Y_bs"], perm=[2, 0, 1, 3])  # (B, S, 2, n)
    g.node("Reshape", ["Y_bs", g.const("shape_bs_2n", np.array([0, 0, 2 * n], np.int64))], ["annotations"])
    if model.cfg.init_state == "mean":
        g.node("Cast", ["src_mask"], ["mask_f"], to=TensorProto.FLOAT)
        g.node("ReduceSum", ["annotations", g.const("axis1b", np.array([1], np.int64))], ["ann_sum"],
               keepdims=0)
        g.node("ReduceSum", ["mask_f", g.const("axis1c", np.array([1], np.int64))], ["count"], keepdims=1)
        summary = g.node("Div", ["ann_sum", "count"], ["summary"])[0]  # padding's annotations are 0 here
    else:  # ←h_1: the backward direction's last state, as it has read the whole sentence
        summary = g.node("Gather", ["Y_h", g.const("one", np.array(1, np.int64))], ["summary"], axis=0)[0]
    g.node("Tanh", [g.linear(summary, model.W_s, "W_s")], ["state"])
    keys = model.attention.U_a if model.cfg.score == "additive" else model.attention.W_k
    g.node("Identity", [g.linear("annotations", keys, "keys_proj")], ["keys"])
    return [("annotations", ["B", "S", 2 * n]), ("keys", ["B", "S", keys.out_features]), ("state", ["B", n])]


def _fixed_context(g: _Graph, model) -> list[tuple[str, list]]:
    """RNNencdec's outputs from the forward GRU's last state: c = tanh(V h_Tx), s_0 = tanh(V_s c)."""
    n = model.cfg.hidden
    g.node("Squeeze", ["Y_h", g.const("axis0", np.array([0], np.int64))], ["last"])
    g.node("Tanh", [g.linear("last", model.V, "V")], ["context"])
    g.node("Tanh", [g.linear("context", model.V_s, "V_s")], ["state"])
    return [("context", ["B", n]), ("state", ["B", n])]


# -- the decoder step, through torch.onnx --------------------------------------------------------
class _SearchStep(nn.Module):
    """RNNsearch's model.step with the encoding's tensors as inputs (not a dataclass)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, y_prev, state, annotations, keys, src_mask):
        return self.model.step(Encoded(annotations, keys, None, src_mask, state), state, y_prev)


class _EncdecStep(_SearchStep):
    """RNNencdec's model.step: the fixed context in, no attention out."""

    def forward(self, y_prev, state, context):  # type: ignore[override]
        enc = Encoded(None, None, context, torch.ones(1, 1, dtype=torch.bool), state)
        return self.model.step(enc, state, y_prev)[:2]


def _Step(model) -> nn.Module:
    return (_SearchStep if isinstance(model, RNNsearch) else _EncdecStep)(model).eval()


def step_names(model) -> tuple[list[str], list[str]]:
    if isinstance(model, RNNsearch):
        return ["y_prev", "state", "annotations", "keys", "src_mask"], ["log_p", "new_state", "alpha"]
    return ["y_prev", "state", "context"], ["log_p", "new_state"]


def _step_inputs(model, rows: int, length: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    cfg = model.cfg
    y = torch.randint(4, model.W_o.out_features, (rows,), generator=g)
    state = torch.randn(rows, cfg.hidden, generator=g) * 0.5
    if not isinstance(model, RNNsearch):
        return y, state, torch.randn(rows, cfg.hidden, generator=g) * 0.5
    mask = torch.ones(rows, length, dtype=torch.bool)
    for r in range(rows):
        mask[r, int(torch.randint(1, length + 1, (1,), generator=g)):] = False
    keys = model.attention.keys(torch.randn(rows, length, 2 * cfg.hidden, generator=g) * 0.5)
    return y, state, torch.randn(rows, length, 2 * cfg.hidden, generator=g) * 0.5, keys.detach(), mask


def _export_step(model, path: Path) -> None:
    with warnings.catch_warnings(), _quiet("torch.onnx", "torch.export", "onnxscript"):
        warnings.simplefilter("ignore")  # the exporter's notes on axis names and deprecations
        _export_step_loudly(model, path)


@contextlib.contextmanager
def _quiet(*loggers: str):
    """These loggers at ERROR for a while (the exporter logs every optional library it lacks)."""
    levels = {name: logging.getLogger(name).level for name in loggers}
    for name in loggers:
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def _export_step_loudly(model, path: Path) -> None:
    names, outputs = step_names(model)
    rows, length = torch.export.Dim("R"), torch.export.Dim("S")
    shapes: list[dict] = [{0: rows}, {0: rows}]
    shapes += [{0: rows, 1: length}] * 3 if isinstance(model, RNNsearch) else [{0: rows}]
    program = torch.onnx.export(_Step(model), _step_inputs(model, 3, 6), dynamo=True, input_names=names,
                                output_names=outputs, dynamic_shapes=tuple(shapes), optimize=True,
                                opset_version=OPSET, verbose=False)
    if program is None:  # what the dynamo exporter returns when it wrote nothing
        raise ExportError("export: torch.onnx wrote no decoder step")
    program.save(str(path))


# -- int8 ---------------------------------------------------------------------------------------------
def quantize_int8(*paths: Path) -> None:
    """Each graph's matrix products with int8 weights, activations quantised as they come
    (onnxruntime's dynamic quantisation), in place. torch.onnx writes a Linear as a Gemm, which
    that quantisation skips: each Gemm on a constant weight becomes MatMul (and Add) first. The
    GRU op and the embeddings stay fp32. Weights take 7 bits (``reduce_range``): on a CPU without
    VNNI (most users' AVX2 ones) onnxruntime multiplies uint8 by int8 in pairs summed into int16,
    which 8-bit weights can overflow; an export is one file for every CPU."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    for path in paths:
        graph = onnx.load(str(path))
        _gemm_as_matmul(graph)
        plain = path.with_suffix(".fp32.onnx")
        onnx.save(graph, str(plain))
        with _quiet("root"):
            quantize_dynamic(str(plain), str(path), weight_type=QuantType.QInt8,
                             op_types_to_quantize=["MatMul"], reduce_range=True)
        plain.unlink()


def _gemm_as_matmul(model) -> None:
    """Gemm(A, B, C) with B a constant, alpha = beta = 1 and A untransposed, as MatMul(A, B') + C."""
    from onnx import helper, numpy_helper

    consts = {t.name: t for t in model.graph.initializer}
    nodes = []
    for n in model.graph.node:
        a = {x.name: helper.get_attribute_value(x) for x in n.attribute}
        if n.op_type != "Gemm" or n.input[1] not in consts or a.get("transA", 0) or \
                a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0:
            nodes.append(n)
            continue
        w = numpy_helper.to_array(consts[n.input[1]])
        name = f"{n.input[1]}_kn"
        w = np.ascontiguousarray(w.T if a.get("transB", 0) else w)
        model.graph.initializer.append(numpy_helper.from_array(w, name))
        if len(n.input) > 2 and n.input[2]:
            nodes.append(helper.make_node("MatMul", [n.input[0], name], [f"{n.output[0]}_mm"]))
            nodes.append(helper.make_node("Add", [f"{n.output[0]}_mm", n.input[2]], [n.output[0]]))
        else:
            nodes.append(helper.make_node("MatMul", [n.input[0], name], [n.output[0]]))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    used = {i for n in model.graph.node for i in n.input}
    kept = [t for t in model.graph.initializer if t.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)


# -- checking the files against PyTorch -------------------------------------------------------------
def check(model, folder: Path, lengths: tuple[int, ...], batches: tuple[int, ...] = (1, 3, 8)) -> dict:
    """Both graphs against PyTorch on random right-padded sources of every batch size and length:
    the encoder's outputs on real words, and the step's from random states. Returns the largest
    difference of each output; an ExportError names the first over its TOLERANCE."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    encoder = ort.InferenceSession(str(folder / ENCODER), opts, providers=["CPUExecutionProvider"])
    step = ort.InferenceSession(str(folder / STEP), opts, providers=["CPUExecutionProvider"])
    worst: dict[str, float] = {}
    g = torch.Generator().manual_seed(0)
    vocab = model.src_emb.num_embeddings
    with torch.no_grad():
        for batch in batches:
            for length in lengths:
                src = torch.randint(4, vocab, (batch, length), generator=g)
                real = torch.randint(1, length + 1, (batch,), generator=g)
                real[0] = length  # one sentence of the full length
                mask = torch.arange(length).unsqueeze(0) < real.unsqueeze(1)
                src = src.masked_fill(~mask, PAD)
                enc = model.encode(src, mask)
                got = dict(zip([o.name for o in encoder.get_outputs()],
                               encoder.run(None, {"src": src.numpy(), "src_mask": mask.numpy()})))
                for name, value in got.items():
                    want = getattr(enc, name).numpy()
                    if want.ndim == 3:  # padding's annotations and keys are the runtime's own
                        want, value = want * mask.unsqueeze(-1).numpy(), value * mask.unsqueeze(-1).numpy()
                    _note(worst, name, want, value, batch, length)
                inputs = _step_inputs(model, batch, length, seed=batch * 1000 + length)
                want_step = _Step(model)(*inputs)
                names, outputs = step_names(model)
                got_step = step.run(None, {k: v.numpy() for k, v in zip(names, inputs)})
                for name, w, v in zip(outputs, want_step, got_step):
                    _note(worst, name, w.numpy(), v, batch, length)
    return {"batches": list(batches), "lengths": list(lengths), "max_abs_difference": worst}


def _note(worst: dict[str, float], name: str, want: np.ndarray, got: np.ndarray, batch: int,
          length: int) -> None:
    if want.shape != got.shape:
        raise ExportError(f"export: {name} has shape {list(got.shape)} in ONNX, {list(want.shape)} in "
                          f"PyTorch (batch {batch}, source length {length}): nothing written")
    diff = float(np.abs(want - got).max()) if want.size else 0.0
    if not diff <= TOLERANCE[name]:  # NaN fails too
        raise ExportError(f"export: {name} differs from PyTorch's by {diff:.3g} (batch {batch}, source "
                          f"length {length}; tolerance {TOLERANCE[name]}): nothing written")
    worst[name] = max(worst.get(name, 0.0), diff)
