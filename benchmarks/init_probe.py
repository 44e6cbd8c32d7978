"""The notebook's reversal models under one initialisation: what each claim measures (JSON line).

    python -m benchmarks.init_probe --seed 3 --init uniform --epochs 30 --arch rnnsearch
    python -m benchmarks.init_probe --seed 1 --init paper --epochs 40 --arch rnnencdec

Trains what notebooks/bahdanau_attention.ipynb trains (the tiny preset on 3,000 reversal
sequences of 3-16 words over 20 words, Adam 0.01, batches of 64) with the given seed,
initialisation and epochs, and prints: greedy exact match and BLEU by length (0-4, 4-8, 8-12,
12+ words) on the notebook's 280 test sequences; for RNNsearch also the attention peaks on
w1..w7 and the share of test rows whose attention peaks on the mirrored source word.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import torch

import rnnsearch
from rnnsearch.config import config_from_dict
from rnnsearch.engine.decode.evaluate import bleu_by_length
from rnnsearch.tools.toy import write_toy_corpus


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--init", default="paper")
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--arch", default="rnnsearch", choices=["rnnsearch", "rnnencdec"])
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    work = Path(tempfile.mkdtemp(prefix="init-probe-"))
    data = write_toy_corpus(work / "toy", task="reverse", n_train=3000, n_valid=100, vocab=20, min_len=3,
                            max_len=16, seed=args.seed)
    cfg = config_from_dict({"preset": "tiny", "model_dir": str(work / "model"), "data": data,
                            "model": {"arch": args.arch, "init": args.init},
                            "train": {"max_epochs": args.epochs, "lr": 0.01, "batch_size": 64,
                                      "valid_every": 0, "valid_metric": "loss", "progress": False,
                                      "seed": args.seed, "threads": args.threads}})
    rnnsearch.train(cfg)
    model = rnnsearch.load(work / "model", device="cpu")
    src = [" ".join(f"w{(5 * k + 7 * j + j * j) % 20}" for j in range(3 + k % 14)) for k in range(280)]
    ref = [" ".join(s.split()[::-1]) for s in src]
    hyps = [t.text for t in model.translate(src, beam=1, attention=False)]
    out = {"seed": args.seed, "init": args.init, "epochs": args.epochs, "arch": args.arch,
           "threads": args.threads,
           "exact": round(float(np.mean([h == r for h, r in zip(hyps, ref)])), 3),
           "bleu_by_length": {b["bucket"]: round(b["bleu"], 1)
                              for b in bleu_by_length(src, hyps, ref, edges=(4, 8, 12))}}
    if args.arch == "rnnsearch":
        words = " ".join(f"w{j}" for j in range(1, 8))
        forced = model.force([words], [" ".join(words.split()[::-1])])[0]
        out["peaks_w1_w7"] = np.array(forced)[:7].argmax(1).tolist()
        rows = mirrored = 0
        for s, w in zip(src, model.force(src, ref)):
            n = len(s.split())
            for i, row in enumerate(w[:n]):
                rows += 1
                mirrored += int(np.argmax(row) == n - 1 - i)
        out["mirrored_share"] = round(mirrored / rows, 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
