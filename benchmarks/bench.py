"""Speed of rnnsearch beside JoeyNMT and OpenNMT-py: training target tokens/s, model FLOPs,
fraction of this machine's GEMM rate, peak memory, greedy and beam-5 sentences/s.

    python benchmarks/bench.py --quick     # about a minute, rnnsearch alone, one JSON object
    python benchmarks/bench.py             # side by side (~1 hour on 2 cores): JSON + table

The model is the anchors' size: emb 256, bidirectional encoder 2 x 256, alignment 256, maxout
512 (so the output layer is 512 x V, as the anchors' 512-wide decoders have), sentencepiece
BPE 8k per side, batches of 64 sentences, Adam 0.001, gradient norm clipped at 1.

--quick uses Multi30k De→En from $RNNSEARCH_DATA/multi30k (or ./data/multi30k, where `rnnsearch
data get multi30k` writes it) when present, else the built-in English→Chinese corpus. The
side-by-side run needs Multi30k (--corpus DIR with train/val/test_2016_flickr .de/.en, plain or
.gz); it installs JoeyNMT 2.3.0 and OpenNMT-py 3.5.1 into virtualenvs of their own (--venvs,
once), trains all three systems twice on identical sentencepiece pieces (a short round A-B-C,
then a longer one C-B-A whose models are kept), decodes test_2016_flickr greedy and beam 5 with
each model in alternating rounds, and reports every figure with the ratios rnnsearch / anchor
computed round by round.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import resource
import shutil
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import anchors  # noqa: E402

from rnnsearch.config import ModelConfig, config_from_dict, merge_dicts  # noqa: E402
from rnnsearch.engine.data import ParallelData, collate, make_batches, read_parallel, target_tokens  # noqa: E402
from rnnsearch.engine.precision import cpu_info  # noqa: E402
from rnnsearch.engine.train import batch_loss, make_optimizer  # noqa: E402
from rnnsearch.engine.translate import Translator  # noqa: E402
from rnnsearch.engine.vocab import build_tokenizers  # noqa: E402
from rnnsearch.nn.model import build_model  # noqa: E402


def gemm_gflops(n: int = 1024, repeats: int = 10, dtype: torch.dtype = torch.float32,
                device: str = "cpu") -> float:
    """This machine's matrix-multiply rate through torch (fp32 unless asked), for n x n x n products
    (on a GPU: n 8192, where large products reach the tensor cores' rate)."""
    a, b = torch.randn(n, n, dtype=dtype, device=device), torch.randn(n, n, dtype=dtype, device=device)
    for _ in range(2):
        a @ b
    _sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    _sync(device)
    return 2 * n ** 3 * repeats / (time.perf_counter() - start) / 1e9


def cpu_features() -> list[str]:
    """The flags that decide this CPU's speed here (two machines may share one model name): the
    vector width, and the bf16 and int8 matrix instructions."""
    wanted = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx")
    return sorted(f for f in cpu_info()[1] if f.startswith(wanted))


def _sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def flops_per_target_token(cfg: ModelConfig, tgt_vocab: int, src_per_tgt: float, src_len: float) -> dict:
    """Multiply-accumulates of one training step per target token, counted from the equations.

    Forward MACs per target token: output layer l*V, deep output (n + m + ctx)*2l, decoder GRU
    3n*(m + n) plus, for RNNsearch, C c_i (3n*ctx), W_a s (n*n') and per source word the
    tanh/v_a (n') and the weighted sum (ctx). Per source word: the encoder 2*3n*(m + n) and
    the keys U_a h (ctx*n') (RNNencdec: one direction, 3n*(m + n)). What is done once per
    sentence (s_0 from W_s; RNNencdec's V, V_s and C c) is left out. Training = 3 x forward
    (backward twice the forward), FLOPs = 2 x MACs. tests/test_bench.py checks the forward
    count against torch's FLOP counter on the model itself.
    """
    m, n, a, maxout = cfg.emb, cfg.hidden, cfg.align, cfg.maxout  # maxout: the docstring's l
    ctx = 2 * n if cfg.arch == "rnnsearch" else n
    per_tgt = maxout * tgt_vocab + (n + m + ctx) * 2 * maxout + 3 * n * (m + n)
    if cfg.arch == "rnnsearch":
        per_tgt += 3 * n * ctx + n * a + src_len * (a + ctx)
        per_src = 2 * 3 * n * (m + n) + ctx * a
    else:
        per_src = 3 * n * (m + n)
    forward = per_tgt + per_src * src_per_tgt
    return {"forward_mflop": 2 * forward / 1e6, "train_mflop": 3 * 2 * forward / 1e6}


# The benchmark model: the anchors' sizes (see the module docstring).
BENCH_CONFIG = {
    "model": {"emb": 256, "hidden": 256, "align": 256, "maxout": 512},
    "vocab": {"kind": "bpe", "size": 8000},
    "train": {"optimizer": "adam", "lr": 0.001, "clip_norm": 1.0, "batch_size": 64, "batching": "bucket",
              "precision": "fp32"},
    "decode": {"precision": "fp32"},
}
SIZES = {"emb": 256, "hidden": 256, "batch": 64}  # what the anchors are given


# $RNNSEARCH_DATA/multi30k (a development copy) when set, else where
# `rnnsearch data get multi30k` writes
DEFAULT_MULTI30K = Path(os.environ.get("RNNSEARCH_DATA") or "data") / "multi30k"


def load_corpus(corpus: Path | None):
    """Multi30k De→En from `corpus` (default: DEFAULT_MULTI30K when it is there, else the built-in
    English→Chinese corpus). A corpus asked for by name must exist."""
    if corpus is not None and not (corpus / "train.de.gz").exists() and not (corpus / "train.de").exists():
        raise SystemExit(f"bench: {corpus} has no train.de(.gz); give --corpus a Multi30k directory")
    corpus = corpus or DEFAULT_MULTI30K
    if (corpus / "train.de.gz").exists() or (corpus / "train.de").exists():
        train = read_parallel(_find(corpus, "train.de"), _find(corpus, "train.en"))
        test = read_parallel(_find(corpus, "test_2016_flickr.de"), _find(corpus, "test_2016_flickr.en"))
        return "multi30k de-en", train, test
    from rnnsearch.tools.democorpus import generate

    pairs = generate(12000, seed=0)
    src, tgt = [" ".join(p.src) for p in pairs], [" ".join(p.tgt) for p in pairs]
    return "demo en-zh", (src[:11000], tgt[:11000]), (src[11000:], tgt[11000:])


def quick(args) -> None:
    """rnnsearch alone, in this process: one JSON object. On a GPU (--device cuda) the same
    loop with the options a GPU run wants: --precision bf16, --gru cudnn (fused encoder),
    --compile (compiled time step), --batch-tokens N."""
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    name, (train_src, train_tgt), (test_src, test_tgt) = load_corpus(
        Path(args.corpus) if args.corpus else None)
    cfg = config_from_dict(merge_dicts(BENCH_CONFIG, {"model": {"gru": args.gru}}))
    src_tok, tgt_tok = build_tokenizers(cfg.vocab, train_src, train_tgt)
    data = ParallelData.encode(train_src, train_tgt, src_tok, tgt_tok, 80, name="bench")
    model = build_model(cfg.model, len(src_tok), len(tgt_tok)).to(device)
    if args.compile:
        model.compile_step()
    optimizer = make_optimizer(cfg, model.parameters())
    if args.batch_tokens:
        batches = make_batches(data, args.batch_tokens, "tokens", "bucket", seed=0)
    else:
        batches = make_batches(data, SIZES["batch"], "sentences", "bucket", seed=0)
    dtype = torch.bfloat16 if args.precision == "bf16" else None
    autocast = torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)

    def train_step(idx: list[int]) -> tuple[int, int]:
        """One whole step (forward, backward, clipping, Adam); its target and source tokens,
        counted on the CPU so that counting costs no GPU synchronisation."""
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

    # training: warm up (compiling, where asked, happens here), then time whole steps for train_seconds
    model.train()
    warmup = args.warmup_steps or (30 if args.compile else 5)
    tokens = src_tokens = steps = 0
    start = None
    stream = itertools.cycle(batches)  # the loop ends on time; profile_steps draws on after it
    for k, idx in enumerate(stream):
        if k == warmup:
            _sync(device)
            start = time.perf_counter()
            tokens = src_tokens = steps = 0
        n_tgt, n_src = train_step(idx)
        tokens += n_tgt
        src_tokens += n_src
        steps += 1
        if start is not None and time.perf_counter() - start >= args.train_seconds:
            break
    _sync(device)
    seconds = time.perf_counter() - start
    tok_s = tokens / seconds
    profile = profile_steps(train_step, stream, device, args.profile) if args.profile else None
    mean_src = sum(len(e.src) for e in data.examples) / len(data)
    flops = flops_per_target_token(cfg.model, len(tgt_tok), src_tokens / tokens, mean_src)
    gpu = device.type == "cuda"
    gemm = gemm_gflops(8192 if gpu else 1024, device=args.device,
                       dtype=torch.bfloat16 if args.precision == "bf16" else torch.float32)

    # decoding: rnnsearch translate's own path (sorted by length, batched, autocast for bf16)
    model.eval()
    translator = Translator(cfg, model, src_tok, tgt_tok, device)
    sents = test_src[: args.decode_sentences]
    def decode_speeds() -> tuple[dict[int, float], dict[int, list[str]]]:
        speed, texts = {}, {}
        for beam in (1, 5):
            for timed in (False, True):  # an untimed pass first on a GPU: kernels, allocator, graph capture
                _sync(device)
                begin = time.perf_counter()
                out = translator.translate(sents, beam=beam, batch_size=args.decode_batch, attention=False,
                                           precision=args.precision)
                _sync(device)
                if timed or not gpu:
                    break
            speed[beam] = len(sents) / (time.perf_counter() - begin)
            texts[beam] = [t.text for t in out]
        return speed, texts

    speed, texts = decode_speeds()
    graphs = None
    if args.cuda_graphs:  # the same decoding replayed from CUDA graphs (on a CPU: its padding, eagerly)
        translator.use_graphs(capture=gpu)
        g_speed, g_texts = decode_speeds()
        graphs = {"mode": "captured" if gpu else "padded, eager (no CUDA device)",
                  "graphs": len(translator.graphs.graphs) if translator.graphs else 0,
                  "greedy_sent_per_s": round(g_speed[1], 1), "beam5_sent_per_s": round(g_speed[5], 1),
                  "greedy_speedup": round(g_speed[1] / speed[1], 2),
                  "beam5_speedup": round(g_speed[5] / speed[5], 2),
                  "same_translations": {b: sum(x == y for x, y in zip(g_texts[b], texts[b])) / len(sents)
                                        for b in (1, 5)}}

    result = {
        "corpus": name, "device": torch.cuda.get_device_name(device) if gpu else str(device),
        "threads": torch.get_num_threads(), "precision": args.precision, "gru": args.gru,
        "compile": args.compile,
        "batch": f"{args.batch_tokens} tokens" if args.batch_tokens else f"{SIZES['batch']} sentences",
        "parameters": model.num_parameters(), "train_steps_timed": steps,
        "train_tgt_tok_per_s": round(tok_s, 1),
        "flops_per_tgt_tok": round(flops["train_mflop"] * 1e6),
        "gemm_gflops": round(gemm, 1),
        "mfu": round(tok_s * flops["train_mflop"] * 1e6 / (gemm * 1e9), 3),
        "decode_sentences": len(sents), "decode_batch": args.decode_batch,
        "greedy_sent_per_s": round(speed[1], 1), "beam5_sent_per_s": round(speed[5], 1),
        "beam5_seconds": round(len(sents) / speed[5], 3), "cuda_graphs": graphs,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
    }
    if gpu:
        result["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated(device) / 2 ** 20, 1)
    if profile:
        result["profile"] = profile
    print(json.dumps(result, indent=1))


def profile_steps(train_step, stream, device: torch.device, path: str, steps: int = 10) -> dict:
    """`steps` more training steps under torch.profiler: where the time goes. Writes the table of
    operators (by self time on the device, or on the CPU without a GPU) to `path`; returns the
    wall time per step, the kernels launched per step and, on a GPU, the fraction of the wall
    time the GPU spent in kernels (low: the step loop is launch-bound)."""
    from torch.profiler import ProfilerActivity, profile

    gpu = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    _sync(device)
    with profile(activities=activities) as prof:
        begin = time.perf_counter()
        tokens = sum(train_step(next(stream))[0] for _ in range(steps))
        _sync(device)
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


# -- side by side -----------------------------------------------------------------

def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _find(corpus: Path, stem: str) -> Path:
    for name in (stem, stem + ".gz"):
        if (corpus / name).exists():
            return corpus / name
    raise SystemExit(f"bench: {corpus} has no {stem} (or {stem}.gz); give --corpus a Multi30k directory")


def prepare_data(corpus: Path, work: Path, test_sentences: int = 0) -> dict:
    """Normalised text for rnnsearch, and the same text cut into rnnsearch's own sentencepiece
    pieces for the anchors, so all three systems see identical tokens."""
    from rnnsearch.engine.data import normalize
    from rnnsearch.engine.vocab import load_tokenizers, save_tokenizers

    data, spm_dir = work / "data", work / "spm"
    cfg = config_from_dict(BENCH_CONFIG)
    splits = {"train": "train", "valid": "val", "test": "test_2016_flickr"}
    texts = {}
    for split, stem in splits.items():
        src, tgt = read_parallel(_find(corpus, f"{stem}.de"), _find(corpus, f"{stem}.en"))
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
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(model_file))
    return [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]


# rnnsearch's systems in the side-by-side run. "rnnsearch" pins fp32 everywhere: the like-for-like
# comparison. "rnnsearch-auto" is what a user gets from the shipped defaults, precision: auto in
# training and decoding (bf16 where it measures faster on the machine, else fp32). "rnnsearch-int8"
# trains nothing: it decodes rnnsearch's fp32 model with --quantize int8.
VARIANTS = {"rnnsearch": {"train": "fp32", "decode": "fp32", "quantize": "none"},
            "rnnsearch-auto": {"train": "auto", "decode": "auto", "quantize": "none"},
            "rnnsearch-int8": {"model_of": "rnnsearch", "decode": "fp32", "quantize": "int8"}}


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
                        precision: str = "fp32", quantize: str = "none") -> dict:
    """`rnnsearch evaluate --output`: it times Translator.translate (tokenising included, the model
    load not) and writes the translations."""
    done = anchors.run([sys.executable, "-m", "rnnsearch", "evaluate", "--model", model, "--src", str(src),
                        "--ref", str(ref), "--beam", str(beam), "--output", str(out), "--device", "cpu",
                        "--precision", precision, "--quantize", quantize,
                        "--batch-size", str(SIZES["batch"])],  # the anchors' batch, not our default
                       out.with_suffix(".log"), env={"PYTHONPATH": str(ROOT / "src")})
    report, _ = json.JSONDecoder().raw_decode(done.output, done.output.index("{"))  # log lines may follow
    seconds = report["translate_seconds"]
    return {"seconds": seconds, "process_seconds": done.seconds, "peak_rss_mb": done.peak_rss_mb,
            "precision": report["precision"]}


def bleu(hyp_lines: list[str], refs: list[str]) -> float:
    import sacrebleu

    return round(sacrebleu.corpus_bleu(hyp_lines, [refs]).score, 2)


def side_by_side(args) -> None:
    work, venvs = Path(args.work).resolve(), Path(args.venvs).expanduser().resolve()
    ours = [name for name in VARIANTS if name in args.variants]
    trained = [name for name in ours if "model_of" not in VARIANTS[name]]
    for name in set(ours) - set(trained):  # decoding-only variants need the model they decode
        source = VARIANTS[name]["model_of"]
        if source not in trained:
            raise SystemExit(f"bench: {name} decodes {source}'s model: name both in --variants")
    anchor_names = ["opennmt", "joeynmt"]
    pythons = {name: anchors.ensure_venv(name, venvs, log) for name in anchor_names}
    data = prepare_data(Path(args.corpus or DEFAULT_MULTI30K), work, args.test_sentences)
    test_src = data["dir"] / "test.src"
    n_test = len(data["test_refs"])
    gemm = [gemm_gflops()]
    log(f"GEMM {gemm[0]:.1f} GFLOP/s; pieces: {data['src_vocab']} / {data['tgt_vocab']} vocabulary")

    def train(name: str, where: Path, steps: int) -> dict:
        log(f"training {name} for {steps} steps in {where}")
        if name in VARIANTS:
            return rnnsearch_train(where, data, steps, VARIANTS[name]["train"])
        if name == "opennmt":
            return anchors.opennmt_train(pythons[name], where, data["dir"], steps, SIZES)
        return anchors.joeynmt_train(pythons[name], where, data["dir"], steps, SIZES)

    systems = trained + anchor_names
    rounds = [("A", systems, args.short_steps), ("B", systems[::-1], args.steps)]
    training = {name: {} for name in systems}
    for label, order, steps in rounds:
        for name in order:
            training[name][label] = train(name, work / f"train-{label}" / name, steps)
            log(f"  {name}: {training[name][label]['tgt_tok_per_s']:.0f} target tokens/s")
    gemm.append(gemm_gflops())

    def translate(name: str, beam: int, out: Path) -> dict:
        if name in VARIANTS:
            v = VARIANTS[name]
            model = training[v.get("model_of", name)]["B"]["model"]
            return rnnsearch_translate(model, data["dir"] / "test.raw.src", data["dir"] / "test.raw.tgt",
                                       out, beam, v["decode"], v["quantize"])
        model = training[name]["B"]["model"]
        if name == "opennmt":
            return anchors.opennmt_translate(pythons[name], model, test_src, out, beam, SIZES["batch"])
        return anchors.joeynmt_translate(pythons[name], Path(model).parent, data["dir"], out, beam, SIZES)

    decoders = ours + anchor_names
    decoding = {name: {1: [], 5: []} for name in decoders}
    outputs = {}
    for r in range(args.decode_rounds):
        order = decoders if r % 2 == 0 else decoders[::-1]
        for beam in (1, 5):
            for name in order:
                out = work / "decode" / f"{name}.beam{beam}.round{r}"
                res = translate(name, beam, out)
                decoding[name][beam].append(res)
                outputs[(name, beam)] = Path(res.get("output", out))
                log(f"{name} beam {beam}: {n_test / res['seconds']:.1f} sentences/s")
    gemm.append(gemm_gflops())
    gemm_rate = sorted(gemm)[len(gemm) // 2]
    gemm_bf16 = gemm_gflops(dtype=torch.bfloat16)

    ours_flops = flops_per_target_token(config_from_dict(BENCH_CONFIG).model, data["tgt_vocab"],
                                        data["src_per_tgt"], data["mean_src_len"])["train_mflop"] * 1e6
    flops = {name: ours_flops for name in trained}
    for name in anchor_names:
        flops[name] = anchors.anchor_flops_per_target_token(
            SIZES["emb"], SIZES["hidden"], 2 * SIZES["hidden"], data["anchor_tgt_vocab"],
            data["src_per_tgt"], data["mean_src_len"])
    speed = lambda runs: [n_test / r["seconds"] for r in runs]  # noqa: E731  sentences/s of each round
    result: dict = {"systems": {}, "ratios": {}}
    for name in decoders:
        hyps = {}
        for beam in (1, 5):
            lines = outputs[(name, beam)].read_text().splitlines()
            if name not in VARIANTS:
                lines = [data["tgt_tok"].sp.decode_pieces(x.split()) for x in lines]
            hyps[beam] = lines
        entry: dict = {}
        if name in training:
            tr = training[name]
            tok = {label: tr[label]["tgt_tok_per_s"] for label, _, _ in rounds}
            precision = tr["B"].get("precision", "fp32")
            entry.update({
                "train_precision": precision,
                "train_tgt_tok_per_s": {k: round(v, 1) for k, v in tok.items()},
                "flops_per_tgt_tok": round(flops[name]),
                # against the GEMM rate of the precision its matrix products ran in
                "mfu": round(sum(tok.values()) / len(tok) * flops[name]
                             / ((gemm_bf16 if precision == "bf16" else gemm_rate) * 1e9), 3),
                "train_peak_rss_mb": round(max(tr[label]["peak_rss_mb"] for label in tok), 1),
                "train_seconds_round_B": round(tr["B"]["seconds"], 1),
            })
        else:
            entry["decodes_model_of"] = VARIANTS[name]["model_of"]
        if name in VARIANTS:
            entry["decode_precision"] = decoding[name][5][-1]["precision"]
            entry["quantize"] = VARIANTS[name]["quantize"]
        entry.update({
            "greedy_sent_per_s": [round(x, 1) for x in speed(decoding[name][1])],
            "beam5_sent_per_s": [round(x, 1) for x in speed(decoding[name][5])],
            "decode_peak_rss_mb": round(max(d["peak_rss_mb"] for b in (1, 5) for d in decoding[name][b]), 1),
            "bleu_greedy": bleu(hyps[1], data["test_refs"]), "bleu_beam5": bleu(hyps[5], data["test_refs"]),
            "mean_hyp_words_beam5": round(sum(len(x.split()) for x in hyps[5]) / n_test, 2),
        })
        result["systems"][name] = entry
    ratios = lambda a, b: [round(x / y, 2) for x, y in zip(a, b)]  # noqa: E731
    for mine in ours:
        for name in anchor_names:
            pair = {"greedy_sent_per_s": ratios(speed(decoding[mine][1]), speed(decoding[name][1])),
                    "beam5_sent_per_s": ratios(speed(decoding[mine][5]), speed(decoding[name][5]))}
            if mine in training:
                pair["train_tgt_tok_per_s"] = ratios([training[mine][r]["tgt_tok_per_s"] for r in "AB"],
                                                     [training[name][r]["tgt_tok_per_s"] for r in "AB"])
                pair["train_peak_rss"] = round(result["systems"][mine]["train_peak_rss_mb"]
                                               / result["systems"][name]["train_peak_rss_mb"], 2)
            result["ratios"][f"{mine}/{name}"] = pair
    result.update({
        "corpus": "multi30k de-en", "test_sentences": n_test, "vocab": [data["src_vocab"], data["tgt_vocab"]],
        "steps": {"A": args.short_steps, "B": args.steps}, "gemm_gflops": [round(g, 1) for g in gemm],
        "gemm_gflops_bf16": round(gemm_bf16, 1),
        "threads": torch.get_num_threads(), "torch": torch.__version__,
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "cpu": cpu_info()[0], "cpu_features": cpu_features(),
        "date": time.strftime("%Y-%m-%d"),
    })
    text = json.dumps(result, indent=1)
    (work / "result.json").write_text(text + "\n")
    print(text)


def time_to_bleu(args) -> None:
    """--curve: BLEU against training minutes for each system (benchmarks/curve.py); writes the
    JSON and the PNG (--figure, default docs/figures/time_to_bleu.{json,png})."""
    import curve
    from demo_seeds import cpu_model

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
    result = {"machine": cpu_model(), "cpu_features": cpu_features(), "threads": args.threads,
              "jobs": args.jobs, "points": args.points, "rnnsearch_config": args.rnnsearch_config,
              "command": " ".join(sys.argv),
              "torch": torch.__version__, "date": time.strftime("%Y-%m-%d")}
    result.update(curve.run_curve(args, data, pythons, log))
    result["seconds"] = round(time.time() - started)
    figure = Path(args.figure)
    figure.parent.mkdir(parents=True, exist_ok=True)
    figure.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    curve.plot(result, figure.with_suffix(".png"))
    print(json.dumps(result, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    ap.add_argument("--work", default=str(ROOT / "benchmarks" / "runs"),
                    help="side by side: working directory")
    ap.add_argument("--venvs", default="~/.cache/rnnsearch-bench",
                    help="side by side: the anchors' virtualenvs")
    ap.add_argument("--short-steps", type=int, default=200, help="side by side: steps of training round A")
    ap.add_argument("--steps", type=int, default=900,
                    help="side by side: steps of round B (the decoded models)")
    ap.add_argument("--decode-rounds", type=int, default=2)
    ap.add_argument("--test-sentences", type=int, default=0,
                    help="side by side: first N test sentences (0: all)")
    ap.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS),
                    help="side by side: rnnsearch's systems (fp32 pinned; the defaults, precision auto; "
                         "the fp32 model decoded with --quantize int8)")
    ap.add_argument("--curve", action="store_true", help="time to BLEU: every system trains for the same "
                    "minutes; its checkpoints at --points minutes are scored (benchmarks/curve.py)")
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
