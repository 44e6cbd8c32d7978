"""Speed of rnnsearch: training target tokens/s, model FLOPs, fraction of this machine's
GEMM rate, peak memory, greedy and beam-5 decoding speed. Prints one JSON object.

    python benchmarks/bench.py --quick          # about a minute, rnnsearch alone

The model is the anchors' size (emb 256, hidden 256 a direction, alignment 256, maxout 256,
sentencepiece BPE 8k per side) on Multi30k De→En when ../shared/data is present, else on the
built-in English→Chinese corpus. The side-by-side comparison with JoeyNMT and OpenNMT-py
(each installed in its own virtualenv) is not part of --quick.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from rnnsearch.config import ModelConfig, config_from_dict  # noqa: E402
from rnnsearch.data import ParallelData, collate, make_batches, read_parallel  # noqa: E402
from rnnsearch.model import build_model  # noqa: E402
from rnnsearch.search import beam_search  # noqa: E402
from rnnsearch.train import make_optimizer, sequence_loss  # noqa: E402
from rnnsearch.vocab import PAD, build_tokenizers  # noqa: E402


def gemm_gflops(n: int = 1024, repeats: int = 10) -> float:
    """This machine's fp32 matrix-multiply rate through torch, for n x n x n products."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(2):
        a @ b
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * n ** 3 * repeats / (time.perf_counter() - start) / 1e9


def flops_per_target_token(cfg: ModelConfig, tgt_vocab: int, src_per_tgt: float, src_len: float) -> dict:
    """Multiply-accumulates of one training step per target token, counted from the equations.

    Forward MACs: output layer l*V, deep output (n + m + ctx)*2l, decoder GRU 3n*(m + ctx + n),
    attention W_a s (n*n') plus, per source word, tanh/v_a (n') and the weighted sum (ctx);
    per source word once: encoder 2*3n*(m + n) and keys U_a h (ctx*n'). Training = 3x forward
    (backward twice the forward), FLOPs = 2 x MACs.
    """
    m, n, a, l = cfg.emb, cfg.hidden, cfg.align, cfg.maxout
    ctx = 2 * n if cfg.arch == "rnnsearch" else n
    per_tgt = l * tgt_vocab + (n + m + ctx) * 2 * l + 3 * n * (m + ctx + n)
    if cfg.arch == "rnnsearch":
        per_tgt += n * a + src_len * (a + ctx)
        per_src = 2 * 3 * n * (m + n) + ctx * a
    else:
        per_src = 3 * n * (m + n)
    forward = per_tgt + per_src * src_per_tgt
    return {"forward_mflop": 2 * forward / 1e6, "train_mflop": 3 * 2 * forward / 1e6}


def load_corpus():
    shared = ROOT.parent / "shared" / "data" / "multi30k"
    if shared.exists():
        train = read_parallel(shared / "train.de.gz", shared / "train.en.gz")
        test = read_parallel(shared / "test_2016_flickr.de.gz", shared / "test_2016_flickr.en.gz")
        return "multi30k de-en", train, test
    from rnnsearch.democorpus import generate

    pairs = generate(12000, seed=0)
    src, tgt = [" ".join(p.src) for p in pairs], [" ".join(p.tgt) for p in pairs]
    return "demo en-zh", (src[:11000], tgt[:11000]), (src[11000:], tgt[11000:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="rnnsearch alone, about a minute")
    ap.add_argument("--train-seconds", type=float, default=30.0, help="steady-state training time measured")
    ap.add_argument("--decode-sentences", type=int, default=200)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    name, (train_src, train_tgt), (test_src, test_tgt) = load_corpus()
    cfg = config_from_dict({"model": {"emb": 256, "hidden": 256, "align": 256, "maxout": 256},
                            "vocab": {"kind": "bpe", "size": 8000},
                            "train": {"optimizer": "adam", "lr": 0.001, "batch_size": 64, "batching": "bucket"}})
    src_tok, tgt_tok = build_tokenizers(cfg.vocab, train_src, train_tgt)
    data = ParallelData.encode(train_src, train_tgt, src_tok, tgt_tok, 80, name="bench")
    model = build_model(cfg.model, len(src_tok), len(tgt_tok)).to(device)
    optimizer = make_optimizer(cfg, model.parameters())
    batches = make_batches(data, 64, "sentences", "bucket", seed=0)

    # training: warm up on 5 batches, then time whole steps for train_seconds
    model.train()
    tokens = src_tokens = steps = 0
    start = None
    for k, idx in enumerate(batches * 10):
        if k == 5:
            start = time.perf_counter()
            tokens = src_tokens = 0
        batch = collate([data.examples[i] for i in idx]).to(device)
        logits, _ = model.logits(batch.src, batch.src_mask, batch.tgt_in)
        loss = sequence_loss(logits, batch.tgt_out) / batch.n_tgt_tokens
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        tokens += batch.n_tgt_tokens
        src_tokens += int(batch.src_mask.sum())
        steps += 1
        if start is not None and time.perf_counter() - start >= args.train_seconds:
            break
    seconds = time.perf_counter() - start
    tok_s = tokens / seconds
    mean_src = sum(len(e.src) for e in data.examples) / len(data)
    flops = flops_per_target_token(cfg.model, len(tgt_tok), src_tokens / tokens, mean_src)
    gemm = gemm_gflops()

    # decoding: sentences sorted by length in batches of 64, as rnnsearch translate does
    model.eval()
    sents = test_src[: args.decode_sentences]
    ids = [src_tok.encode(s) for s in sents]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    speed = {}
    for beam in (1, 5):
        begin = time.perf_counter()
        for b in range(0, len(order), 64):
            rows = [ids[i] for i in order[b:b + 64]]
            width = max(len(r) for r in rows)
            src = torch.tensor([r + [PAD] * (width - len(r)) for r in rows], device=device)
            beam_search(model, src, src != PAD, beam=beam, alpha=1.0 if beam > 1 else 0.0, with_attention=False)
        speed[beam] = len(sents) / (time.perf_counter() - begin)

    result = {
        "corpus": name, "device": str(device), "threads": torch.get_num_threads(),
        "parameters": model.num_parameters(), "train_steps_timed": steps - 5,
        "train_tgt_tok_per_s": round(tok_s, 1),
        "flops_per_tgt_tok": round(flops["train_mflop"] * 1e6),
        "gemm_gflops": round(gemm, 1),
        "mfu": round(tok_s * flops["train_mflop"] * 1e6 / (gemm * 1e9), 3),
        "greedy_sent_per_s": round(speed[1], 1), "beam5_sent_per_s": round(speed[5], 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
