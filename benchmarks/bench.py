"""Speed of rnnsearch beside JoeyNMT, OpenNMT-py and Marian: training target tokens/s, model FLOPs,
fraction of this machine's GEMM rate, peak memory, greedy and beam-5 sentences/s.

    python -m benchmarks.bench --quick     # about a minute, rnnsearch alone, one JSON object
    python -m benchmarks.bench             # side by side (~1 hour on 2 cores): JSON + table
    python -m benchmarks.bench --curve     # time to BLEU (benchmarks.curve): JSON + PNG

The model is the anchors' size: emb 256, bidirectional encoder 2 x 256, alignment 256, maxout
512 (so the output layer is 512 x V, as the anchors' 512-wide decoders have), sentencepiece
BPE 8k per side, batches of 64 sentences, Adam 0.001, gradient norm clipped at 1.

--quick uses Multi30k De→En from $RNNSEARCH_DATA/multi30k (or ./data/multi30k, where `rnnsearch
data get multi30k` writes it) when present, else the built-in English→Chinese corpus. The
side-by-side run needs Multi30k (--corpus DIR with train/val/test_2016_flickr .de/.en, plain or
.gz); it installs JoeyNMT 2.3.0 and OpenNMT-py 3.5.1 (and, with --anchors marian, Marian
1.12.42 from the pymarian wheel) into virtualenvs of their own (--venvs, once), trains every
system twice on identical sentencepiece pieces (a short round A-B-C, then a longer one C-B-A
whose models are kept), decodes test_2016_flickr greedy and beam 5 with
each model in alternating rounds (at each --decode-batches size: a system's speed in a round is its
fastest), and reports every figure with the ratios rnnsearch / anchor computed round by round.
With --variants rnnsearch-onnx rnnsearch-onnx-int8, rnnsearch's fp32 model is also exported once
(`rnnsearch export --format onnx`, fp32 and --quantize int8) and decoded by the torch-free runtime
(runtime/) from a virtualenv without PyTorch (--python-runtime), against rnnsearch's PyTorch path.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import sentencepiece as spm
import torch

from benchmarks import anchors, curve
from benchmarks.common import (
    BENCH_CONFIG,
    DEFAULT_MULTI30K,
    ROOT,
    SIZES,
    architecture,
    bleu,
    cpu_features,
    cpu_flags,
    cpu_name,
    find,
    gemm_gflops,
    has_multi30k,
    log,
    print_result,
    sync,
)
from rnnsearch.config import ModelConfig, config_from_dict, merge_dicts
from rnnsearch.engine.accel.graphs import GraphedStep
from rnnsearch.engine.accel.speedup import compile_time_step, speed_up
from rnnsearch.engine.data.parallel import (
    ParallelData,
    collate,
    make_batches,
    normalize,
    read_parallel,
    target_tokens,
)
from rnnsearch.engine.data.vocab import build_tokenizers, load_tokenizers, save_tokenizers
from rnnsearch.engine.decode.translator import Translator
from rnnsearch.engine.train.launch import make_optimizer
from rnnsearch.engine.train.objective import batch_loss
from rnnsearch.nn.model import build_model
from rnnsearch.tools.apple_corpus import generate


def flops_per_target_token(cfg: ModelConfig, tgt_vocab: int, src_per_tgt: float, src_len: float) -> dict:
    """Multiply-accumulates of one training step per target token, counted from the equations.

    Forward MACs per target token: output layer l*V, deep output (n + m + ctx)*2l, decoder GRU
    3n*(m + n) plus, for RNNsearch, C c_i (3n*ctx), W_a s (n*n') and per source word the
    tanh/v_a (n') and the weighted sum (ctx). Per source word: the encoder 2*3n*(m + n) and
    the keys U_a h (ctx*n') (RNNencdec: one direction, 3n*(m + n)). What is done once per
    sentence (s_0 from W_s; RNNencdec's V, V_s, C c and C_o c) is left out. Training = 3 x forward
    (backward twice the forward), FLOPs = 2 x MACs. tests/test_bench.py checks the forward
    count against torch's FLOP counter on the model itself.
    """
    m, n, a, maxout = cfg.emb, cfg.hidden, cfg.align, cfg.maxout  # maxout: the docstring's l
    ctx = 2 * n if cfg.arch == "rnnsearch" else n
    c_o = ctx if cfg.arch == "rnnsearch" else 0  # RNNencdec's C_o c is once per sentence
    per_tgt = maxout * tgt_vocab + (n + m + c_o) * 2 * maxout + 3 * n * (m + n)
    if cfg.arch == "rnnsearch":
        per_tgt += 3 * n * ctx + n * a + src_len * (a + ctx)
        per_src = 2 * 3 * n * (m + n) + ctx * a
    else:
        per_src = 3 * n * (m + n)
    forward = per_tgt + per_src * src_per_tgt
    return {"forward_mflop": 2 * forward / 1e6, "train_mflop": 3 * 2 * forward / 1e6}


def load_corpus(corpus: Path | None):
    """Multi30k De→En from `corpus` (default: DEFAULT_MULTI30K when it is there, else the built-in
    English→Chinese corpus). A corpus asked for by name must exist."""
    if corpus is not None and not has_multi30k(corpus):
        raise SystemExit(f"bench: {corpus} has no train.de(.gz); give --corpus a Multi30k directory")
    corpus = corpus or DEFAULT_MULTI30K
    if has_multi30k(corpus):
        train = read_parallel(find(corpus, "train.de"), find(corpus, "train.en"))
        test = read_parallel(find(corpus, "test_2016_flickr.de"), find(corpus, "test_2016_flickr.en"))
        return "multi30k de-en", train, test
    pairs = generate(12000, seed=0)
    src, tgt = [" ".join(p.src) for p in pairs], [" ".join(p.tgt) for p in pairs]
    return "demo en-zh", (src[:11000], tgt[:11000]), (src[11000:], tgt[11000:])


# -- quick: rnnsearch alone ---------------------------------------------------------------

def quick(args) -> None:
    """rnnsearch alone, in this process: one JSON object. On a GPU (--device cuda) the same
    loop with the options a GPU run wants: --precision bf16, --gru cudnn (fused encoder),
    --compile (compiled time step), --batch-tokens N."""
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    name, (train_src, train_tgt), (test_src, _) = load_corpus(Path(args.corpus) if args.corpus else None)
    cfg = config_from_dict(merge_dicts(BENCH_CONFIG, {"model": {"gru": args.gru}}))
    src_tok, tgt_tok = build_tokenizers(cfg.vocab, train_src, train_tgt)
    data = ParallelData.encode(train_src, train_tgt, src_tok, tgt_tok, 80, name="bench")
    model = speed_up(build_model(cfg.model, len(src_tok), len(tgt_tok)).to(device))  # as the trainer runs it
    if args.compile:
        compile_time_step(model)
    size, unit = (args.batch_tokens, "tokens") if args.batch_tokens else (SIZES["batch"], "sentences")
    batches = make_batches(data, size, unit, "bucket", seed=0)
    train_step = make_train_step(model, make_optimizer(cfg, model.parameters()), data, device, args.precision)
    if gpu:
        torch.cuda.reset_peak_memory_stats(device)
    result = {"corpus": name, "device": torch.cuda.get_device_name(device) if gpu else str(device),
              "threads": torch.get_num_threads(), "precision": args.precision, "gru": args.gru,
              "compile": args.compile, "batch": f"{size} {unit}", "parameters": model.num_parameters()}

    model.train()
    stream = itertools.cycle(batches)  # the loop ends on time; profile_steps draws on after it
    timed = time_training(train_step, stream, device, args.warmup_steps or (30 if args.compile else 5),
                          args.train_seconds)
    profile = profile_steps(train_step, stream, device, args.profile) if args.profile else None
    gemm = gemm_gflops(8192 if gpu else 1024, device=args.device,
                       dtype=torch.bfloat16 if args.precision == "bf16" else torch.float32)
    result.update(training_figures(cfg.model, len(tgt_tok), data, timed, gemm))

    model.eval()
    translator = Translator(cfg, model, src_tok, tgt_tok, device)
    result.update(decoding_figures(translator, test_src[: args.decode_sentences], args, device))
    if args.profile:
        profile["beam5"] = profile_decoding(translator, test_src[: args.decode_sentences], args, device)
    result.update({
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "machine": architecture(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
    })
    if gpu:
        result["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated(device) / 2 ** 20, 1)
    if profile:
        result["profile"] = profile
    print_result(result)


def make_train_step(model, optimizer, data: ParallelData, device: torch.device, precision: str):
    """A function that runs one whole training step (forward, backward, clipping, Adam) on the
    examples of a batch's indices and returns their target and source tokens, counted on the CPU so
    that counting costs no GPU synchronisation. Matrix products in bf16 (autocast) if asked."""
    dtype = torch.bfloat16 if precision == "bf16" else None
    autocast = torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)

    def train_step(idx: list[int]) -> tuple[int, int]:
        examples = [data.examples[i] for i in idx]
        n_tgt = target_tokens(examples)
        batch = collate(examples).to(device)
        with autocast:
            loss = batch_loss(model, batch) / n_tgt
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return n_tgt, sum(len(e.src) for e in examples)

    return train_step


def time_training(train_step, stream, device: torch.device, warmup: int, seconds: float) -> dict:
    """`warmup` untimed steps (compiling, where asked, happens here), then whole steps timed for
    `seconds`: the steps, target and source tokens and seconds of the timed part."""
    tokens = src_tokens = steps = 0
    start = None
    for k, idx in enumerate(stream):
        if k == warmup:
            sync(device)
            start = time.perf_counter()
            tokens = src_tokens = steps = 0
        n_tgt, n_src = train_step(idx)
        tokens += n_tgt
        src_tokens += n_src
        steps += 1
        if start is not None and time.perf_counter() - start >= seconds:
            break
    sync(device)
    seconds_timed = time.perf_counter() - start
    return {"steps": steps, "tokens": tokens, "src_tokens": src_tokens, "seconds": seconds_timed}


def training_figures(cfg: ModelConfig, tgt_vocab: int, data: ParallelData, timed: dict, gemm: float) -> dict:
    """Target tokens/s of the timed steps, the FLOPs of a target token, and their product's share
    of the GEMM rate `gemm` (GFLOP/s): the model FLOPs utilisation (mfu)."""
    tok_s = timed["tokens"] / timed["seconds"]
    mean_src = sum(len(e.src) for e in data.examples) / len(data)
    flops = flops_per_target_token(cfg, tgt_vocab, timed["src_tokens"] / timed["tokens"], mean_src)
    return {"train_steps_timed": timed["steps"], "train_tgt_tok_per_s": round(tok_s, 1),
            "flops_per_tgt_tok": round(flops["train_mflop"] * 1e6), "gemm_gflops": round(gemm, 1),
            "mfu": round(tok_s * flops["train_mflop"] * 1e6 / (gemm * 1e9), 3)}


def decode_speeds(translator: Translator, sents: list[str], args,
                  device: torch.device) -> tuple[dict[int, float], dict[int, list[str]]]:
    """Sentences/s and translations of greedy and beam-5 decoding through rnnsearch translate's own
    path (sorted by length, batched, autocast for bf16)."""
    speed, texts = {}, {}
    for beam in (1, 5):
        for timed in (False, True):  # an untimed pass first on a GPU: kernels, allocator, graph capture
            sync(device)
            begin = time.perf_counter()
            out = translator.translate(sents, beam=beam, batch_size=args.decode_batch, attention=False,
                                       precision=args.precision)
            sync(device)
            if timed or device.type != "cuda":
                break
        speed[beam] = len(sents) / (time.perf_counter() - begin)
        texts[beam] = [t.text for t in out]
    return speed, texts


def decoding_figures(translator: Translator, sents: list[str], args, device: torch.device) -> dict:
    """Greedy and beam-5 speeds; with --cuda-graphs the same decoding again, each step replayed
    from a CUDA graph (on a CPU: the graphs' padding, run eagerly), against the eager one."""
    speed, texts = decode_speeds(translator, sents, args, device)
    graphs = None
    if args.cuda_graphs:
        gpu = device.type == "cuda"
        step = GraphedStep(translator.model, capture=gpu)
        graphed = Translator(translator.cfg, translator.model, translator.src_tok, translator.tgt_tok,
                             translator.device, graphs=step)
        g_speed, g_texts = decode_speeds(graphed, sents, args, device)
        graphs = {"mode": "captured" if gpu else "padded, eager (no CUDA device)", "graphs": len(step.graphs),
                  "greedy_sent_per_s": round(g_speed[1], 1), "beam5_sent_per_s": round(g_speed[5], 1),
                  "greedy_speedup": round(g_speed[1] / speed[1], 2),
                  "beam5_speedup": round(g_speed[5] / speed[5], 2),
                  "same_translations": {b: sum(x == y for x, y in zip(g_texts[b], texts[b])) / len(sents)
                                        for b in (1, 5)}}
    return {"decode_sentences": len(sents), "decode_batch": args.decode_batch,
            "greedy_sent_per_s": round(speed[1], 1), "beam5_sent_per_s": round(speed[5], 1),
            "beam5_seconds": round(len(sents) / speed[5], 3), "cuda_graphs": graphs}


def profile_decoding(translator: Translator, sents: list[str], args, device: torch.device) -> dict:
    """Beam-5 decoding of `sents` once more under torch.profiler: the operator table (by self
    time) goes beside the training one, to `--profile`'s name with ".beam5" before its suffix."""
    from torch.profiler import ProfilerActivity, profile

    gpu = device.type == "cuda"
    path = Path(args.profile)
    path = path.with_name(f"{path.stem}.beam5{path.suffix or '.txt'}")
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])) as prof:
        begin = time.perf_counter()
        translator.translate(sents, beam=5, batch_size=args.decode_batch, attention=False,
                             precision=args.precision)
        sync(device)
        wall = time.perf_counter() - begin
    sort = "self_cuda_time_total" if gpu else "self_cpu_time_total"
    path.write_text(prof.key_averages().table(sort_by=sort, row_limit=40) + "\n")
    return {"sentences": len(sents), "seconds": round(wall, 3), "table": str(path)}


def profile_steps(train_step, stream, device: torch.device, path: str, steps: int = 10) -> dict:
    """`steps` more training steps under torch.profiler: where the time goes. Writes the table of
    operators (by self time on the device, or on the CPU without a GPU) to `path`; returns the
    wall time per step, the kernels launched per step and, on a GPU, the fraction of the wall
    time the GPU spent in kernels (low: the step loop is launch-bound)."""
    from torch.profiler import ProfilerActivity, profile

    gpu = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    sync(device)
    with profile(activities=activities) as prof:
        begin = time.perf_counter()
        tokens = sum(train_step(next(stream))[0] for _ in range(steps))
        sync(device)
        wall = time.perf_counter() - begin
    table = prof.key_averages()
    sort = "self_cuda_time_total" if gpu else "self_cpu_time_total"
    Path(path).write_text(table.table(sort_by=sort, row_limit=40) + "\n")
    out = {"steps": steps, "tgt_tokens": tokens, "ms_per_step": round(1000 * wall / steps, 2), "table": path}
    try:
        if gpu:
            launches = sum(e.count for e in table
                           if e.key in ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC"))
            out["kernel_launches_per_step"] = round(launches / steps, 1)
            busy = sum(e.device_time_total for e in prof.events()
                       if e.device_type == torch.autograd.DeviceType.CUDA)
            out["gpu_busy_fraction"] = round(busy / 1e6 / wall, 3)
    except Exception as err:
        # the profiler's event API moves between torch versions: keep the table
        out["summary_error"] = repr(err)
    return out



# -- the side-by-side run's data and rnnsearch's systems -------------------------------------

def prepare_data(corpus: Path, work: Path, test_sentences: int = 0) -> dict:
    """Normalised text for rnnsearch, and the same text cut into rnnsearch's own sentencepiece
    pieces for the anchors, so all three systems see identical tokens."""
    data, spm_dir = work / "data", work / "spm"
    cfg = config_from_dict(BENCH_CONFIG)
    splits = {"train": "train", "valid": "val", "test": "test_2016_flickr"}
    texts = {}
    for split, stem in splits.items():
        src, tgt = read_parallel(find(corpus, f"{stem}.de"), find(corpus, f"{stem}.en"))
        if split == "test" and test_sentences:
            src, tgt = src[:test_sentences], tgt[:test_sentences]
        texts[split] = ([normalize(x) for x in src], [normalize(x) for x in tgt])
    if not (spm_dir / "tgt.spm.model").exists():
        log("training the sentencepiece models (as rnnsearch train does)")
        spm_dir.mkdir(parents=True, exist_ok=True)
        save_tokenizers(spm_dir, cfg.vocab, *build_tokenizers(cfg.vocab, *texts["train"], cfg.train.seed))
    src_tok, tgt_tok = load_tokenizers(spm_dir, cfg.vocab)
    data.mkdir(parents=True, exist_ok=True)
    pieces = {}  # (split, side) -> each line's pieces
    for split, (src, tgt) in texts.items():
        for side, lines, tok in (("src", src, src_tok), ("tgt", tgt, tgt_tok)):
            pieces[split, side] = [tok.sp.encode(x, out_type=str) for x in lines]
            (data / f"{split}.raw.{side}").write_text("".join(x + "\n" for x in lines))
            (data / f"{split}.{side}").write_text("".join(" ".join(p) + "\n" for p in pieces[split, side]))
    for side in ("src", "tgt"):  # a small validation set for anchors that save only when they validate
        (data / f"valid100.{side}").write_text(
            "".join(" ".join(p) + "\n" for p in pieces["valid", side][:100]))
    src_n = [len(p) for p in pieces["train", "src"]]
    tgt_n = [len(p) for p in pieces["train", "tgt"]]
    # the anchors build their vocabularies from the pieces that occur, plus their specials
    tgt_types = len({x for p in pieces["train", "tgt"] for x in p}) + 4
    return {"dir": data, "spm": spm_dir, "tgt_tok": tgt_tok, "test_refs": texts["test"][1],
            "src_vocab": len(src_tok), "tgt_vocab": len(tgt_tok), "anchor_tgt_vocab": tgt_types,
            "src_per_tgt": sum(src_n) / (sum(tgt_n) + len(tgt_n)), "mean_src_len": sum(src_n) / len(src_n)}


def _pieces(model_file: Path) -> list:
    sp = spm.SentencePieceProcessor(model_file=str(model_file))
    return [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]


# rnnsearch's systems in the side-by-side run. "rnnsearch" pins fp32 everywhere: the like-for-like
# comparison. "rnnsearch-auto" is what a user gets from the shipped defaults, precision: auto in
# training and decoding (bf16 where it measures faster on the machine, else fp32). "rnnsearch-int8"
# trains nothing: it decodes rnnsearch's fp32 model with --quantize int8, and "rnnsearch-int8-shortlist"
# with --shortlist auto as well (the output layer over a lexical shortlist counted on the training
# pairs: co-occurrence, or eflomal's links where `rnnsearch data align` made them; built at load, untimed).
# "rnnsearch-onnx" and "rnnsearch-onnx-int8" decode the same fp32 model exported to ONNX (fp32, and
# --quantize int8) with the torch-free runtime (runtime/, rnnsearch_runtime) in a process of its own.
VARIANTS = {"rnnsearch": {"train": "fp32", "decode": "fp32", "quantize": "none"},
            "rnnsearch-auto": {"train": "auto", "decode": "auto", "quantize": "none"},
            "rnnsearch-int8": {"model_of": "rnnsearch", "decode": "fp32", "quantize": "int8"},
            "rnnsearch-int8-shortlist": {"model_of": "rnnsearch", "decode": "fp32", "quantize": "int8",
                                         "shortlist": "auto"},
            "rnnsearch-onnx": {"model_of": "rnnsearch", "decode": "fp32", "quantize": "none",
                               "runtime": "onnx"},
            "rnnsearch-onnx-int8": {"model_of": "rnnsearch", "decode": "fp32", "quantize": "int8",
                                    "runtime": "onnx"}}
# what runs unless --variants says otherwise: the shortlist measured no faster on the AVX2 machine at
# 2 threads and batches of 64 (docs/benchmarks.md), so it is there to be named, not run each time
DEFAULT_VARIANTS = ["rnnsearch", "rnnsearch-auto", "rnnsearch-int8"]
# the anchors' own fastest CPU setting, decoding their fp32 model: like is compared with like
ANCHOR_VARIANTS = {"opennmt-int8": {"model_of": "opennmt", "flags": ("-precision", "int8"),
                                    "quantize": "int8"}}


def rnnsearch_train(work: Path, data: dict, steps: int, precision: str = "fp32") -> dict:
    d = data["dir"]
    cfg = json.loads(json.dumps(BENCH_CONFIG))
    cfg["train"]["precision"] = precision
    cfg["model_dir"] = str(work / "model")
    cfg["data"] = {"train_src": str(d / "train.raw.src"), "train_tgt": str(d / "train.raw.tgt"),
                   "valid_src": str(d / "valid.raw.src"), "valid_tgt": str(d / "valid.raw.tgt"),
                   "max_len": 200}
    cfg["train"].update({"max_steps": steps, "max_epochs": 0, "valid_every": 0, "log_every": 20,
                         "progress": False, "valid_beam": 1})
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    path = work / "config.yaml"
    path.write_text(json.dumps(cfg, indent=1))  # JSON is YAML
    done = anchors.run([sys.executable, "-m", "rnnsearch", "train", str(path)], work / "train.log",
                       env={"PYTHONPATH": str(ROOT / "src")})
    for name in ("src.spm.model", "tgt.spm.model"):  # identical pieces, checked, not assumed
        if _pieces(work / "model" / name) != _pieces(data["spm"] / name):
            raise RuntimeError(f"rnnsearch's {name} differs from the one the anchors were given")
    records = [json.loads(x) for x in (work / "model" / "log.jsonl").read_text().splitlines()]
    train = [r for r in records if r.get("kind") == "train"]
    rates = [r["tok_per_s"] for r in train]
    return {"tgt_tok_per_s": anchors.steady(rates), "reports": len(rates), "seconds": done.seconds,
            "peak_rss_mb": done.peak_rss_mb, "model": str(work / "model"),
            "precision": train[-1]["precision"]}  # what "auto" resolved to, or the pinned one


def rnnsearch_translate(model: str, src: Path, ref: Path, out: Path, beam: int,
                        precision: str = "fp32", quantize: str = "none", shortlist: str | None = None,
                        batch: int | None = SIZES["batch"], env: dict | None = None) -> dict:
    """`rnnsearch evaluate --output` in a process of its own: it times Translator.translate
    (tokenising included, the model load not) and writes the translations; `batch` sentences in
    flight (the anchors' by default, None: the model's own), `env` added to its environment."""
    extra = ["--shortlist", shortlist] if shortlist else []
    extra += ["--batch-size", str(batch)] if batch else []
    done = anchors.run([sys.executable, "-m", "rnnsearch", "evaluate", "--model", model, "--src", str(src),
                        "--ref", str(ref), "--beam", str(beam), "--output", str(out), "--device", "cpu",
                        "--precision", precision, "--quantize", quantize, *extra],
                       out.with_suffix(".log"), env={"PYTHONPATH": str(ROOT / "src"), **(env or {})})
    report, _ = json.JSONDecoder().raw_decode(done.output, done.output.index("{"))  # log lines may follow
    seconds = report["translate_seconds"]
    return {"seconds": seconds, "process_seconds": done.seconds, "peak_rss_mb": done.peak_rss_mb,
            "precision": report["precision"]}


# -- the torch-free runtime's systems -------------------------------------------------------

RUNTIME_DIR = ROOT / "runtime"
# runs in the runtime's virtualenv: times translate as `rnnsearch evaluate` times Translator.translate
# (tokenising included, the model load not), writes the translations, and says whether torch came in
RUNTIME_DRIVER = """
import json, sys, time
import onnxruntime, rnnsearch_runtime
model, src, out, beam, batch, threads = sys.argv[1:7]
lines = open(src, encoding="utf-8").read().splitlines()
runtime = rnnsearch_runtime.load(model, int(threads))
start = time.perf_counter()
found = runtime.translate(lines, beam=int(beam), batch_size=int(batch), attention=False)
seconds = time.perf_counter() - start
with open(out, "w", encoding="utf-8") as f:
    f.write("".join(t.text + "\\n" for t in found))
print(json.dumps({"translate_seconds": seconds, "torch_imported": "torch" in sys.modules,
                  "onnxruntime": onnxruntime.__version__}))
"""
RUNTIME_CHECK = ("import importlib.util, json, onnxruntime, rnnsearch_runtime; print(json.dumps({'torch': "
                 "importlib.util.find_spec('torch') is not None, 'onnxruntime': onnxruntime.__version__}))")


def runtime_digest() -> str:
    """sha256 of runtime/'s pyproject.toml and sources: what a runtime virtualenv was installed from."""
    digest = hashlib.sha256()
    for path in sorted([RUNTIME_DIR / "pyproject.toml", *(RUNTIME_DIR / "src").rglob("*.py")]):
        digest.update(str(path.relative_to(RUNTIME_DIR)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def check_runtime_python(python: Path) -> str:
    """`python` imports rnnsearch_runtime and cannot import torch (what the ONNX variants' memory
    and speed are meant to be without); its onnxruntime version."""
    if not python.is_file():
        raise SystemExit(f"bench: --python-runtime {python}: no such file (a Python with ./runtime in it)")
    done = subprocess.run([str(python), "-c", RUNTIME_CHECK], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bench: --python-runtime {python} cannot import rnnsearch_runtime "
                         f"(pip install ./runtime there): {(done.stderr.strip().splitlines() or [''])[-1]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    if found["torch"]:
        raise SystemExit(f"bench: --python-runtime {python} can import torch; the ONNX variants run "
                         "in a Python without PyTorch")
    return found["onnxruntime"]


def ensure_runtime_venv(root: Path) -> Path:
    """The python of root/rnnsearch-runtime, a virtualenv with `pip install ./runtime` (numpy,
    onnxruntime, sentencepiece; no torch), installed on first use and again whenever runtime/'s
    sources differ from those it was installed from (a plain install copies them)."""
    venv = root / "rnnsearch-runtime"
    python, marker = venv / "bin" / "python", venv / "rnnsearch-bench.json"
    wanted = {"runtime": runtime_digest()}
    if marker.exists() and json.loads(marker.read_text()) == wanted:
        return python
    log(f"installing ./runtime into {venv} (no torch)")
    marker.unlink(missing_ok=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    anchors.run([str(python), "-m", "pip", "install", "--disable-pip-version-check", str(RUNTIME_DIR)],
                venv / "pip.log")
    check_runtime_python(python)
    marker.write_text(json.dumps(wanted))
    return python


def runtime_export(model: str, out: Path, quantize: str) -> Path:
    """`rnnsearch export --format onnx` of `model` into `out` (replaced) in a process of its own."""
    shutil.rmtree(out, ignore_errors=True)
    anchors.run([sys.executable, "-m", "rnnsearch", "export", "--model", model, "--format", "onnx",
                 "--out", str(out), "--quantize", quantize], out.with_name(out.name + ".export.log"),
                env={"PYTHONPATH": str(ROOT / "src")})
    return out


def runtime_translate(python: Path, model: Path, src: Path, out: Path, beam: int, batch: int,
                      threads: int) -> dict:
    """The exported `model` decoding `src` with rnnsearch_runtime in a process of its own from
    `python` (RUNTIME_DRIVER): the seconds of its translate call, its peak RSS (the runtime's
    alone: numpy, onnxruntime, the two sessions), and the onnxruntime version."""
    done = anchors.run([str(python), "-c", RUNTIME_DRIVER, str(model), str(src), str(out), str(beam),
                        str(batch), str(threads)], out.with_suffix(".log"))
    report = json.loads([x for x in done.output.splitlines() if x.startswith("{")][-1])
    if report["torch_imported"]:
        raise RuntimeError(f"{python}: the runtime imported torch while translating")
    return {"seconds": report["translate_seconds"], "process_seconds": done.seconds,
            "peak_rss_mb": done.peak_rss_mb, "precision": "fp32", "onnxruntime": report["onnxruntime"]}


# -- side by side -------------------------------------------------------------------------

ANCHOR_NAMES = ["opennmt", "joeynmt", "marian"]
DEFAULT_ANCHORS = ["opennmt", "joeynmt"]  # Marian when named: its wheel is 600 MB


def anchor_variants(cpu_flags: list[str] | set[str]) -> dict[str, dict]:
    """Every anchor's decoding variants on a CPU with these flags: OpenNMT-py's int8 and each of
    Marian's GEMM types the CPU has (anchors.MARIAN_GEMMS)."""
    return {**ANCHOR_VARIANTS, **anchors.marian_variants(cpu_flags)}


def anchor_systems(chosen: list[str], variants: dict | None = None) -> tuple[list[str], list[str]]:
    """The anchors trained (those of --anchors) and every anchor system decoded (they and their
    `variants`, e.g. opennmt-int8 with opennmt): what rnnsearch's systems are compared with."""
    trained = [name for name in ANCHOR_NAMES if name in chosen]
    variants = ANCHOR_VARIANTS if variants is None else variants
    return trained, trained + [name for name, v in variants.items() if v["model_of"] in trained]


class SideBySide:
    """The side-by-side run (see the module docstring): rnnsearch's variants and the anchors
    trained in two rounds, decoded in alternating rounds, every figure with its ratios."""

    def __init__(self, args) -> None:
        self.args = args
        self.work = Path(args.work).resolve()
        self.ours = [name for name in VARIANTS if name in args.variants]
        self.trained = [name for name in self.ours if "model_of" not in VARIANTS[name]]
        for name in set(self.ours) - set(self.trained):  # decoding-only variants need the model they decode
            source = VARIANTS[name]["model_of"]
            if source not in self.trained:
                raise SystemExit(f"bench: {name} decodes {source}'s model: name both in --variants")
        self.threads = args.threads or torch.get_num_threads()  # Marian's --cpu-threads
        self.anchor_variants = anchor_variants(cpu_flags())
        self.anchor_names, self.anchors = anchor_systems(args.anchors, self.anchor_variants)
        self.failed: dict[str, str] = {}  # a Marian GEMM type that crashed: its error
        self.decoders = self.ours + self.anchors
        venvs = Path(args.venvs).expanduser().resolve()
        self.pythons = {name: anchors.ensure_venv(name, venvs, log) for name in self.anchor_names}
        self.exported: dict[str, Path] = {}  # ONNX variant -> its export (run(), after training)
        self.python_runtime, self.onnxruntime = Path(), ""  # set where an ONNX variant runs
        if any(VARIANTS[name].get("runtime") == "onnx" for name in self.ours):
            self.python_runtime = (Path(args.python_runtime) if args.python_runtime
                                   else ensure_runtime_venv(venvs))
            self.onnxruntime = check_runtime_python(self.python_runtime)
        self.data = prepare_data(Path(args.corpus or DEFAULT_MULTI30K), self.work, args.test_sentences)
        self.n_test = len(self.data["test_refs"])
        self.training: dict = {}  # system -> round -> its training figures
        self.batches = args.decode_batches  # sentences per decoding batch; the first gives the BLEU
        # system -> (beam, batch) -> rounds
        self.decoding: dict = {name: {(b, n): [] for b in (1, 5) for n in self.batches}
                               for name in self.decoders}
        self.outputs: dict = {}  # (system, beam) -> its translations of the last round, first batch size

    def run(self) -> dict:
        """Train, decode and score everything; the result."""
        gemm = [gemm_gflops()]
        pieces = f"{self.data['src_vocab']} / {self.data['tgt_vocab']}"
        log(f"GEMM {gemm[0]:.1f} GFLOP/s; pieces: {pieces} vocabulary")
        self.train_rounds()
        self.export_runtime_models()
        gemm.append(gemm_gflops())
        self.decode_rounds()
        gemm.append(gemm_gflops())
        gemm_rates = {"fp32": sorted(gemm)[len(gemm) // 2], "bf16": gemm_gflops(dtype=torch.bfloat16)}
        flops = self.flops()
        result: dict = {"systems": {name: self.system(name, flops, gemm_rates) for name in self.decoders}}
        result["ratios"] = self.ratios(result["systems"])
        args, data = self.args, self.data
        result.update({
            "corpus": "multi30k de-en", "test_sentences": self.n_test,
            "vocab": [data["src_vocab"], data["tgt_vocab"]],
            "steps": {"A": args.short_steps, "B": args.steps}, "gemm_gflops": [round(g, 1) for g in gemm],
            "gemm_gflops_bf16": round(gemm_rates["bf16"], 1),
            "threads": torch.get_num_threads(), "torch": torch.__version__,
            "anchor_packages": {name: anchors.ANCHORS[name]["package"] for name in self.anchor_names},
            "machine": architecture(), "cpu": cpu_name(), "cpu_features": cpu_features(),
            "date": time.strftime("%Y-%m-%d"),
            "command": " ".join(["python -m benchmarks.bench", *sys.argv[1:]]),
        })
        if self.onnxruntime:
            result.update({"python_runtime": str(self.python_runtime), "onnxruntime": self.onnxruntime})
        return result

    def export_runtime_models(self) -> None:
        """Each ONNX variant's export of the model it decodes, once a run, into --work/onnx/."""
        for name in self.ours:
            spec = VARIANTS[name]
            if spec.get("runtime") == "onnx":
                log(f"exporting {spec['model_of']}'s model for {name}")
                self.exported[name] = runtime_export(self.training[spec["model_of"]]["B"]["model"],
                                                     self.work / "onnx" / name, spec["quantize"])

    def train(self, name: str, where: Path, steps: int) -> dict:
        log(f"training {name} for {steps} steps in {where}")
        if name in VARIANTS:
            return rnnsearch_train(where, self.data, steps, VARIANTS[name]["train"])
        if name == "opennmt":
            return anchors.opennmt_train(self.pythons[name], where, self.data["dir"], steps, SIZES)
        if name == "marian":
            return anchors.marian_train(self.pythons[name], where, self.data["dir"], steps, SIZES,
                                        self.threads)
        return anchors.joeynmt_train(self.pythons[name], where, self.data["dir"], steps, SIZES)

    def train_rounds(self) -> None:
        """Round A (--short-steps) in one order, round B (--steps, the models decoded) in the other.
        The figures go to --work/training.json; with --reuse-training a system whose figures are
        there for the same steps (and whose model is still on disk) is not trained again."""
        systems = self.trained + self.anchor_names
        rounds = [("A", systems, self.args.short_steps), ("B", systems[::-1], self.args.steps)]
        record = self.work / "training.json"
        saved = json.loads(record.read_text()) if self.args.reuse_training and record.exists() else {}
        self.training = {name: {} for name in systems}
        for label, order, steps in rounds:
            for name in order:
                old = saved.get(name, {}).get(label)
                if old and old.get("steps") == steps and Path(old["model"]).exists():
                    log(f"reusing {name}'s round {label} ({steps} steps) from {record}")
                    self.training[name][label] = old
                    continue
                self.training[name][label] = {**self.train(name, self.work / f"train-{label}" / name, steps),
                                              "steps": steps}
                log(f"  {name}: {self.training[name][label]['tgt_tok_per_s']:.0f} target tokens/s")
                record.write_text(json.dumps(self.training, indent=1) + "\n")

    def translate(self, name: str, beam: int, batch: int, out: Path) -> dict:
        data = self.data
        model_of = {**VARIANTS, **self.anchor_variants}.get(name, {}).get("model_of", name)
        model = self.training[model_of]["B"]["model"]
        if model_of == "marian":
            return self.marian_translate(name, beam, batch, out)
        if name in self.exported:
            return runtime_translate(self.python_runtime, self.exported[name], data["dir"] / "test.raw.src",
                                     out, beam, batch, self.threads)
        if name in VARIANTS:
            v = VARIANTS[name]
            return rnnsearch_translate(model, data["dir"] / "test.raw.src", data["dir"] / "test.raw.tgt",
                                       out, beam, v["decode"], v["quantize"], v.get("shortlist"), batch)
        if name in ANCHOR_VARIANTS:
            return anchors.opennmt_translate(self.pythons["opennmt"], model, data["dir"] / "test.src", out,
                                             beam, batch, ANCHOR_VARIANTS[name]["flags"])
        if name == "opennmt":
            return anchors.opennmt_translate(self.pythons[name], model, data["dir"] / "test.src", out, beam,
                                             batch)
        return anchors.joeynmt_translate(self.pythons[name], Path(model).parent, data["dir"], out, beam,
                                         {**SIZES, "batch": batch})

    def marian_translate(self, name: str, beam: int, batch: int, out: Path) -> dict:
        """Marian's fp32 model, or one of its GEMM types: online, or converted first (once)."""
        trained, spec = self.training["marian"]["B"], self.anchor_variants.get(name, {})
        model, gemm = trained["model"], spec.get("gemm")
        if spec.get("convert"):
            model, gemm = anchors.marian_convert(self.pythons["marian"], model, gemm), None
        return anchors.marian_translate(self.pythons["marian"], model, trained["vocabs"],
                                        self.data["dir"] / "test.src", out, beam, batch, self.threads, gemm)

    def try_translate(self, name: str, beam: int, batch: int, out: Path) -> dict | None:
        """translate, except that a Marian GEMM type that fails (to convert or to decode) is
        recorded in self.failed with Marian's error, and not run again; None then."""
        try:
            return self.translate(name, beam, batch, out)
        except anchors.MarianError as err:
            if "gemm" not in self.anchor_variants.get(name, {}):
                raise
            self.failed[name] = str(err)
            log(f"{name} failed: {self.failed[name]}")
            return None

    def decode_rounds(self) -> None:
        """--decode-rounds rounds of greedy then beam 5 at each --decode-batches size, every system
        in turn, the order reversed each round."""
        for r in range(self.args.decode_rounds):
            order = self.decoders if r % 2 == 0 else self.decoders[::-1]
            for beam in (1, 5):
                for batch in self.batches:
                    for name in (n for n in order if n not in self.failed):
                        out = self.work / "decode" / f"{name}.beam{beam}.batch{batch}.round{r}"
                        res = self.try_translate(name, beam, batch, out)
                        if res is None:
                            continue
                        self.decoding[name][beam, batch].append(res)
                        if batch == self.batches[0]:
                            self.outputs[(name, beam)] = Path(res.get("output", out))
                        log(f"{name} beam {beam}, batches of {batch}: "
                            f"{self.n_test / res['seconds']:.1f} sentences/s")

    def flops(self) -> dict[str, float]:
        """Training FLOPs per target token of each trained system, each counted for its own model."""
        data = self.data
        ours = flops_per_target_token(config_from_dict(BENCH_CONFIG).model, data["tgt_vocab"],
                                      data["src_per_tgt"], data["mean_src_len"])["train_mflop"] * 1e6
        flops = {name: ours for name in self.trained}
        for name in self.anchor_names:
            if name == "marian":  # its vocabulary: the pieces that occur, </s> and <unk>
                flops[name] = anchors.marian_flops_per_target_token(
                    SIZES["emb"], SIZES["hidden"], self.training[name]["B"]["tgt_vocab"],
                    data["src_per_tgt"], data["mean_src_len"])
                continue
            flops[name] = anchors.anchor_flops_per_target_token(
                SIZES["emb"], SIZES["hidden"], 2 * SIZES["hidden"], data["anchor_tgt_vocab"],
                data["src_per_tgt"], data["mean_src_len"])
        return flops

    def speeds(self, name: str, beam: int, batch: int | None = None) -> list[float]:
        """Sentences/s of each decoding round at `batch` sentences a batch; without one, each
        round's fastest over --decode-batches (the system at its fastest setting)."""
        if batch is not None:
            return [self.n_test / r["seconds"] for r in self.decoding[name][beam, batch]]
        return [max(round_) for round_ in zip(*(self.speeds(name, beam, n) for n in self.batches))]

    def hypotheses(self, name: str) -> dict[int, list[str]]:
        """Each beam's translations of the last round, as text (the anchors' pieces joined)."""
        hyps = {}
        for beam in (1, 5):
            lines = self.outputs[(name, beam)].read_text().splitlines()
            if name not in VARIANTS:
                lines = [self.data["tgt_tok"].sp.decode_pieces(x.split()) for x in lines]
            hyps[beam] = lines
        return hyps

    def training_entry(self, name: str, flops: dict[str, float], gemm_rates: dict[str, float]) -> dict:
        tr = self.training[name]
        tok = {label: tr[label]["tgt_tok_per_s"] for label in "AB"}
        precision = tr["B"].get("precision", "fp32")
        return {
            "train_precision": precision,
            "train_tgt_tok_per_s": {k: round(v, 1) for k, v in tok.items()},
            "flops_per_tgt_tok": round(flops[name]),
            # against the GEMM rate of the precision its matrix products ran in
            "mfu": round(sum(tok.values()) / len(tok) * flops[name]
                         / (gemm_rates["bf16" if precision == "bf16" else "fp32"] * 1e9), 3),
            "train_peak_rss_mb": round(max(tr[label]["peak_rss_mb"] for label in tok), 1),
            "train_seconds_round_B": round(tr["B"]["seconds"], 1),
        }

    def system(self, name: str, flops: dict[str, float], gemm_rates: dict[str, float]) -> dict:
        """One system's figures: training (if it trains), decoding speeds, memory and BLEU."""
        specs = {**VARIANTS, **self.anchor_variants}
        if name in self.training:
            entry = self.training_entry(name, flops, gemm_rates)
        else:
            entry = {"decodes_model_of": specs[name]["model_of"]}
        if "gemm" in specs.get(name, {}):
            how = " (converted)" if specs[name]["convert"] else " (online)"
            entry["gemm_type"] = specs[name]["gemm"] + how
        # what each side decoded with, so that a ratio says whether it compares like with like
        entry["quantize"] = specs.get(name, {}).get("quantize", "none")
        if name in self.failed:
            return {**entry, "failed": self.failed[name]}
        if name in VARIANTS:
            entry["decode_precision"] = self.decoding[name][5, self.batches[0]][-1]["precision"]
        if VARIANTS.get(name, {}).get("shortlist"):
            entry["shortlist"] = VARIANTS[name]["shortlist"]
        if VARIANTS.get(name, {}).get("runtime") == "onnx":  # what decoded it, and the files it read
            entry["decoder"] = f"rnnsearch-runtime, onnxruntime {self.onnxruntime}, no torch"
            if name in self.exported:
                entry["onnx_mb"] = round(sum(f.stat().st_size for f in self.exported[name].glob("*.onnx"))
                                         / 2 ** 20, 1)
        hyps, refs = self.hypotheses(name), self.data["test_refs"]
        decoded = [d for rounds in self.decoding[name].values() for d in rounds]
        if len(self.batches) > 1:  # each batch size's own speeds beside the fastest
            entry["sent_per_s_by_batch"] = {
                f"beam{b}": {str(n): [round(x, 1) for x in self.speeds(name, b, n)] for n in self.batches}
                for b in (1, 5)}
            # and the peak RSS of each setting: memory compared where the speeds are
            entry["decode_peak_rss_mb_by_batch"] = {
                f"beam{b}": {str(n): round(max(d["peak_rss_mb"] for d in self.decoding[name][b, n]), 1)
                             for n in self.batches} for b in (1, 5)}
        entry.update({
            "greedy_sent_per_s": [round(x, 1) for x in self.speeds(name, 1)],
            "beam5_sent_per_s": [round(x, 1) for x in self.speeds(name, 5)],
            "decode_peak_rss_mb": round(max(d["peak_rss_mb"] for d in decoded), 1),
            "bleu_greedy": bleu(hyps[1], refs), "bleu_beam5": bleu(hyps[5], refs),
            "mean_hyp_words_beam5": round(sum(len(x.split()) for x in hyps[5]) / self.n_test, 2),
        })
        return entry

    def ratios(self, systems: dict) -> dict:
        """rnnsearch / anchor, round by round, for each of rnnsearch's systems and each anchor."""
        ratio = lambda a, b: [round(x / y, 2) for x, y in zip(a, b)]  # noqa: E731
        out = {}
        ran = [name for name in self.anchors if name not in self.failed]
        for mine in self.ours:
            for name in ran:
                pair = {"greedy_sent_per_s": ratio(self.speeds(mine, 1), self.speeds(name, 1)),
                        "beam5_sent_per_s": ratio(self.speeds(mine, 5), self.speeds(name, 5))}
                if mine in self.training and name in self.training:
                    rates = {s: [self.training[s][r]["tgt_tok_per_s"] for r in "AB"] for s in (mine, name)}
                    pair["train_tgt_tok_per_s"] = ratio(rates[mine], rates[name])
                    pair["train_peak_rss"] = round(systems[mine]["train_peak_rss_mb"]
                                                   / systems[name]["train_peak_rss_mb"], 2)
                out[f"{mine}/{name}"] = pair
        # each round, rnnsearch's fastest variant against the fastest anchor (each at its fastest size)
        fastest = lambda names, beam: [max(r) for r in zip(*(self.speeds(n, beam) for n in names))]  # noqa: E731
        out["fastest/fastest"] = {f"{key}_sent_per_s": ratio(fastest(self.ours, b), fastest(ran, b))
                                  for key, b in (("greedy", 1), ("beam5", 5))}
        for anchor in self.anchor_names:  # and against each toolkit's fastest setting, any precision
            family = [n for n in ran
                      if n == anchor or self.anchor_variants.get(n, {}).get("model_of") == anchor]
            if len(family) > 1:
                for mine in ["fastest", *self.ours]:  # rnnsearch's fastest, then each of its systems
                    names = self.ours if mine == "fastest" else [mine]
                    out[f"{mine}/{anchor}-fastest"] = {
                        f"{key}_sent_per_s": ratio(fastest(names, b), fastest(family, b))
                        for key, b in (("greedy", 1), ("beam5", 5))}
        out.update(self.runtime_ratios(systems))
        return out

    def runtime_ratios(self, systems: dict) -> dict:
        """Each ONNX variant over rnnsearch's PyTorch decoding of the same model: over fp32
        ("rnnsearch") and over the PyTorch variant quantised alike; speeds round by round (each at
        its fastest batch size), and the decoding processes' peak RSS, over all settings and at
        each batch size."""
        ratio = lambda a, b: [round(x / y, 2) for x, y in zip(a, b)]  # noqa: E731
        out = {}
        for mine in (n for n in self.ours if VARIANTS[n].get("runtime") == "onnx"):
            spec = VARIANTS[mine]
            torch_side = [n for n in self.ours if "runtime" not in VARIANTS[n]
                          and VARIANTS[n].get("shortlist") is None
                          and (n == "rnnsearch" or VARIANTS[n]["quantize"] == spec["quantize"])]
            for theirs in torch_side:
                pair = {"greedy_sent_per_s": ratio(self.speeds(mine, 1), self.speeds(theirs, 1)),
                        "beam5_sent_per_s": ratio(self.speeds(mine, 5), self.speeds(theirs, 5))}
                if systems.get(mine, {}).get("decode_peak_rss_mb") and systems.get(theirs, {}).get(
                        "decode_peak_rss_mb"):
                    pair["decode_peak_rss"] = round(systems[mine]["decode_peak_rss_mb"]
                                                    / systems[theirs]["decode_peak_rss_mb"], 2)
                by_batch = [systems.get(n, {}).get("decode_peak_rss_mb_by_batch") for n in (mine, theirs)]
                if all(by_batch):
                    pair["decode_peak_rss_by_batch"] = {
                        beam: {n: round(rss / by_batch[1][beam][n], 2) for n, rss in sizes.items()}
                        for beam, sizes in by_batch[0].items()}
                out[f"{mine}/{theirs}"] = pair
        return out


def side_by_side(args) -> None:
    """The side-by-side run: its JSON on stdout and in --work/result.json."""
    run = SideBySide(args)
    print_result(run.run(), run.work / "result.json")


# -- time to BLEU -------------------------------------------------------------------------

def time_to_bleu(args) -> None:
    """--curve: BLEU against training minutes for each system (benchmarks.curve); writes the
    JSON and the PNG (--figure, default docs/figures/time_to_bleu.{json,png})."""
    try:
        bases = [curve.system_options(s)[0] for s in args.systems]
    except ValueError as e:
        raise SystemExit(f"bench: {e}") from None
    bad = [s for s in bases if s not in curve.SYSTEMS]
    if bad or args.points != sorted(args.points):
        raise SystemExit(f"bench: --systems from {', '.join(curve.SYSTEMS)} (NAME@lrX: learning rate X; "
                         f"opennmt@dropX: its dropout X); --points ascending (got {bad or args.points})")
    work = Path(args.work).resolve()
    venvs = Path(args.venvs).expanduser().resolve()
    pythons = {name: anchors.ensure_venv(name, venvs, log) for name in set(bases) if name in anchors.ANCHORS}
    data = prepare_data(Path(args.corpus or DEFAULT_MULTI30K), work, args.test_sentences)
    started = time.time()
    result = {"machine": cpu_name(), "cpu_features": cpu_features(), "threads": args.threads,
              "jobs": args.jobs, "points": args.points, "rnnsearch_config": args.rnnsearch_config,
              "command": " ".join(sys.argv),
              "torch": torch.__version__, "date": time.strftime("%Y-%m-%d")}
    result.update(curve.run_curve(args, data, pythons, log))
    result["seconds"] = round(time.time() - started)
    figure = Path(args.figure)
    figure.parent.mkdir(parents=True, exist_ok=True)
    curve_json = figure.with_suffix(".json")
    curve_json.write_text(json.dumps(result, indent=1) + "\n")
    curve.plot(result, figure.with_suffix(".png"))
    print_result(result)


# -- the command line ---------------------------------------------------------------------

def add_quick_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--quick", action="store_true", help="rnnsearch alone, about a minute")
    ap.add_argument("--train-seconds", type=float, default=30.0,
                    help="--quick: steady-state training time measured")
    ap.add_argument("--decode-sentences", type=int, default=200, help="--quick: test sentences decoded")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="--quick: matrix products in bf16 (autocast) in training and decoding; "
                         "mfu against bf16 GEMM")
    ap.add_argument("--gru", choices=["paper", "cudnn"], default="paper",
                    help="--quick: GRU form; cudnn runs the encoder in torch's fused kernel")
    ap.add_argument("--compile", action="store_true", help="--quick: torch.compile the decoder's time step")
    ap.add_argument("--cuda-graphs", action="store_true",
                    help="--quick: decode a second time with each step replayed from a CUDA graph (on a CPU: "
                         "the graphs' padding, run eagerly); speeds and agreement under cuda_graphs")
    ap.add_argument("--profile", metavar="FILE", help="--quick: profile 10 more training steps, operator "
                    "table to FILE, summary (ms per step, kernel launches, GPU busy fraction) in the JSON")
    ap.add_argument("--batch-tokens", type=int, default=0, help="--quick: batches of N padded target tokens "
                    "instead of 64 sentences")
    ap.add_argument("--warmup-steps", type=int, default=0,
                    help="--quick: untimed steps (default 5, 30 with --compile)")
    ap.add_argument("--decode-batch", type=int, default=64, help="--quick: sentences per decoding batch")
    ap.add_argument("--corpus",
                    help="a Multi30k directory (train/val/test_2016_flickr .de/.en, plain or .gz); "
                         "default $RNNSEARCH_DATA/multi30k or ./data/multi30k; --quick falls back to "
                         "the built-in corpus if absent")


def add_side_by_side_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--work", default=str(ROOT / "benchmarks" / "runs"),
                    help="side by side: working directory")
    ap.add_argument("--venvs", default="~/.cache/rnnsearch-bench",
                    help="side by side: the anchors' virtualenvs")
    ap.add_argument("--short-steps", type=int, default=200, help="side by side: steps of training round A")
    ap.add_argument("--steps", type=int, default=900,
                    help="side by side: steps of round B (the decoded models)")
    ap.add_argument("--decode-rounds", type=int, default=2)
    ap.add_argument("--reuse-training", action="store_true",
                    help="side by side: take each system's training figures and model from --work/"
                         "training.json where an earlier run left them for the same steps; train the rest")
    ap.add_argument("--decode-batches", type=int, nargs="+", default=[SIZES["batch"]],
                    help="side by side: sentences per decoding batch, each timed; a system's speed is its "
                         "fastest, BLEU from the first")
    ap.add_argument("--test-sentences", type=int, default=0,
                    help="side by side: first N test sentences (0: all)")
    ap.add_argument("--anchors", nargs="+", choices=ANCHOR_NAMES, default=DEFAULT_ANCHORS,
                    help="side by side: the other toolkits trained and decoded (each with its variants: "
                         "opennmt brings opennmt-int8, marian each GEMM type of anchors.MARIAN_GEMMS the "
                         "CPU has; default opennmt joeynmt)")
    ap.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=DEFAULT_VARIANTS,
                    help="side by side: rnnsearch's systems (fp32 pinned; the defaults, precision auto; "
                         "the fp32 model decoded with --quantize int8; and, named only, with --shortlist "
                         "auto too, or exported to ONNX and decoded by the torch-free runtime: "
                         "rnnsearch-onnx, rnnsearch-onnx-int8)")
    ap.add_argument("--python-runtime",
                    help="side by side: the Python (with ./runtime installed, without torch) that runs the "
                         "ONNX variants; default: the virtualenv --venvs/rnnsearch-runtime, made with "
                         "`pip install ./runtime` and made again when runtime/ changes")


def add_curve_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--curve", action="store_true", help="time to BLEU: every system trains for the same "
                    "minutes; its checkpoints at --points minutes are scored (benchmarks.curve)")
    # dense early, where 30 BLEU is crossed: "minutes to 30" interpolates between the points
    ap.add_argument("--points", type=float, nargs="+", default=[2, 3, 4, 5, 6, 8, 10, 15, 20],
                    help="--curve: training minutes at which each system's model is scored")
    ap.add_argument("--systems", nargs="+", default=["rnnsearch", "opennmt", "rnnsearch-bench", "joeynmt"],
                    help="--curve: which systems, in the order they start")
    ap.add_argument("--jobs", type=int, default=2, help="--curve: systems training at once (each --threads)")
    ap.add_argument("--save-minutes", type=float, default=0.25, help="--curve: rnnsearch saves this often")
    ap.add_argument("--save-steps", type=int, default=25, help="--curve: the anchors save this often")
    ap.add_argument("--rnnsearch-config", default="configs/multi30k_de_en_cpu.yaml",
                    help="--curve: the recipe of the system 'rnnsearch' (its data paths are replaced)")
    ap.add_argument("--figure", default=str(ROOT / "docs" / "figures" / "time_to_bleu.png"),
                    help="--curve: where the PNG goes (and the JSON, beside it)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_quick_options(ap)
    add_side_by_side_options(ap)
    add_curve_options(ap)
    args = ap.parse_args()
    if args.curve:
        args.threads = args.threads or 1
        time_to_bleu(args)
    elif args.quick:
        quick(args)
    else:
        side_by_side(args)


if __name__ == "__main__":
    main()
