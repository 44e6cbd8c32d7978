"""Built-in toy tasks (copy and reverse) for the quickstart and the tests.

Sentences are sequences of random "words" w0..w{V-1}; the target is the source copied
or reversed. Reversal is the task where attention must find a non-monotone
alignment: a trained RNNsearch shows a clean anti-diagonal.
"""

from __future__ import annotations

import random
from pathlib import Path

from rnnsearch.io import atomic_write_text


def toy_pairs(n: int, task: str = "reverse", vocab: int = 20, min_len: int = 3, max_len: int = 10,
              seed: int = 0) -> tuple[list[str], list[str]]:
    if task not in ("copy", "reverse"):
        raise ValueError(f"unknown toy task {task!r} (copy or reverse)")
    rng = random.Random(seed)
    srcs, tgts = [], []
    for _ in range(n):
        words = [f"w{rng.randrange(vocab)}" for _ in range(rng.randint(min_len, max_len))]
        srcs.append(" ".join(words))
        tgts.append(" ".join(words[::-1] if task == "reverse" else words))
    return srcs, tgts


def write_toy_corpus(out_dir: str | Path, task: str = "reverse", n_train: int = 4000, n_valid: int = 200,
                     seed: int = 0, **kw) -> dict[str, str]:
    """Write train/valid files (src/tgt) into out_dir; return their paths by name."""
    out_dir = Path(out_dir)
    paths = {}
    for split, n, s in (("train", n_train, seed), ("valid", n_valid, seed + 1)):
        src, tgt = toy_pairs(n, task, seed=s, **kw)
        for side, lines in (("src", src), ("tgt", tgt)):
            path = out_dir / f"{split}.{side}"
            atomic_write_text(path, "\n".join(lines) + "\n")
            paths[f"{split}_{side}"] = str(path)
    return paths
