"""``rnnsearch figure structure``: the untrained-attention experiment, done with the real models.

1. An untrained bidirectional tanh-RNN encoder (16 units a direction, so 7 x 32
   annotations) reads [1..7] from a 20-word vocabulary; an untrained decoder takes 7
   steps of additive attention. The weights come out near uniform, 1/7 ≈ 0.143.
2. "Without attention vs Bahdanau attention", measured rather than drawn: the norm of
   ∂c_i/∂h_j, how much the context of decoder step i can change with encoder state j.
   For RNNencdec only the last state reaches the decoder; for RNNsearch every state does.
3. The same attention trained to reverse sequences: the anti-diagonal appears.

The notebook's slips are fixed here: ticks read x1..x7 (not x2..x8), and dot-product
scores are not used on vectors of different widths (see attention.py for keys).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Literal, Union, cast

import torch
from torch import nn

from rnnsearch.config import ModelConfig
from rnnsearch.nn.attention import Attention
from rnnsearch.nn.model import Encoded, RNNencdec, RNNsearch, build_model

log = logging.getLogger("rnnsearch")
INPUT = [1, 2, 3, 4, 5, 6, 7]


def untrained_attention(seed: int = 0, vocab: int = 20, hidden: int = 16) -> torch.Tensor:
    """(7 decoder steps, 7 source positions) attention of an untrained tanh-RNN RNNsearch."""
    torch.manual_seed(seed)
    emb = nn.Embedding(vocab, hidden)
    encoder = nn.RNN(hidden, hidden, nonlinearity="tanh", bidirectional=True, batch_first=True)
    attention = Attention("additive", 2 * hidden, 2 * hidden, hidden)
    for p in attention.parameters():  # untrained but not zero: small random alignment model
        nn.init.normal_(p, 0.0, 0.1)
    decoder = nn.RNNCell(2 * hidden, 2 * hidden)
    with torch.no_grad():
        annotations, _ = encoder(emb(torch.tensor([INPUT])))  # (1, 7, 32)
        keys = attention.keys(annotations)
        mask = torch.ones(1, len(INPUT), dtype=torch.bool)
        s, rows = annotations.mean(1), []
        for _ in INPUT:
            context, alpha = attention(s, keys, annotations, mask)
            rows.append(alpha[0])
            s = decoder(context, s)
    return torch.stack(rows)


def access_map(arch: Literal["rnnsearch", "rnnencdec"], steps: int = 7, seed: int = 0) -> torch.Tensor:
    """‖∂c_i/∂h_j‖ (steps x source positions) for an untrained model of `arch`."""
    torch.manual_seed(seed)
    cfg = ModelConfig(arch=arch, emb=16, hidden=16, align=16, maxout=8)
    model = cast(Union[RNNsearch, RNNencdec], build_model(cfg, 20, 20).double().eval())
    with torch.no_grad():
        for p in model.parameters():  # away from the paper's tiny init, so gradients are visible
            p.normal_(0.0, 0.3)
    src = torch.tensor([INPUT])
    mask = torch.ones_like(src, dtype=torch.bool)
    x = model.src_emb(src)
    states, _ = model.enc_fwd.run(model.enc_fwd.W(x), mask, x.new_zeros(1, cfg.hidden))
    if isinstance(model, RNNsearch):
        bwd, _ = model.enc_bwd.run(model.enc_bwd.W(x), mask, x.new_zeros(1, cfg.hidden), reverse=True)
        states = torch.cat([states, bwd], -1)
    states = states.detach()

    def contexts(h: torch.Tensor) -> torch.Tensor:
        # The decoder's view of the encoder states h_j: the model's own encode -> attend path.
        if isinstance(model, RNNsearch):
            enc = Encoded(h, model.attention.keys(h), None, mask, torch.tanh(model.W_s(h[:, 0, 16:])))
        else:
            c = torch.tanh(model.V(h[:, -1]))  # c = tanh(V h_Tx)
            enc = Encoded(None, None, c, mask, torch.tanh(model.V_s(c)))
        s, y, out = enc.state, torch.tensor([2]), []
        for i in range(steps):
            c, _ = model.context(enc, s)
            out.append(c[0])
            _, s, _ = model.step(enc, s, y)
            y = torch.tensor([INPUT[min(i, len(INPUT) - 1)]])
        return torch.stack(out)

    jac = torch.autograd.functional.jacobian(contexts, states)  # (steps, ctx, 1, S, width)
    return jac[:, :, 0].pow(2).sum(dim=(1, 3)).sqrt()  # (steps, S)


def trained_reverse_attention(out_dir: Path, seed: int = 0, epochs: int = 12) -> torch.Tensor:
    """Train a small RNNsearch to reverse 7-word sequences; attention on w1..w7."""
    from rnnsearch.config import config_from_dict
    from rnnsearch.engine.decode.loading import load
    from rnnsearch.engine.train.trainer import train
    from rnnsearch.tools.toy import write_toy_corpus

    data = write_toy_corpus(out_dir / "data", task="reverse", n_train=3000, n_valid=100, vocab=20,
                            min_len=5, max_len=9, seed=seed)
    cfg = config_from_dict({"preset": "tiny", "model_dir": str(out_dir / "model"), "data": data,
                            "model": {"emb": 32, "hidden": 32, "align": 32, "maxout": 32},
                            "train": {"max_epochs": epochs, "lr": 0.01, "batch_size": 32, "valid_every": 0,
                                      "progress": False, "tensorboard": False, "seed": seed}})
    if not (out_dir / "model" / "DONE").exists():
        if (out_dir / "model").exists():
            import shutil

            shutil.rmtree(out_dir / "model")
        train(cfg)
    model = load(out_dir / "model", device="cpu")
    words = " ".join(f"w{i}" for i in INPUT)
    forced = model.force([words], [" ".join(reversed(words.split()))])[0]
    return torch.tensor(forced)[: len(INPUT)]


def structure_figure(out_dir: str | Path = "figures", seed: int = 0, epochs: int = 12) -> dict:
    """Compute the three experiments, print them, and draw structure.png (four panels)."""
    from rnnsearch.tools.plotting import _matplotlib

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    uniform = untrained_attention(seed)
    encdec, search = access_map("rnnencdec", seed=seed), access_map("rnnsearch", seed=seed)
    reverse = trained_reverse_attention(out / "reverse", seed=seed, epochs=epochs)
    result = {"untrained_attention": uniform.tolist(), "access_rnnencdec": encdec.tolist(),
              "access_rnnsearch": search.tolist(), "trained_reverse_attention": reverse.tolist(),
              "untrained_mean": float(uniform.mean()),
              "untrained_max_deviation": float((uniform - 1 / 7).abs().max())}

    _, plt = _matplotlib()
    ticks = [f"x{i}" for i in INPUT]
    fig, axes = plt.subplots(1, 4, figsize=(16, 4.2))
    panels = [(uniform, "untrained RNNsearch: α_ij ≈ 1/7", "attention"),
              (encdec / encdec.max(),
               "without attention (RNNencdec):\n‖∂c_i/∂h_j‖ — only h_7 reaches c", "access"),
              (search / search.max(),
               "Bahdanau attention (RNNsearch):\n‖∂c_i/∂h_j‖ — every h_j reaches c_i", "access"),
              (reverse, "trained to reverse: α_ij", "attention")]
    for ax, (m, title, kind) in zip(axes, panels):
        ax.imshow(m.numpy(), cmap="gray_r", vmin=0, vmax=1 if kind == "access" else max(0.3, float(m.max())))
        ax.set_title(title, fontsize=10)
        ax.set_xticks(range(7))
        ax.set_xticklabels(ticks)
        ax.set_yticks(range(m.shape[0]))
        ax.set_yticklabels([f"y{i + 1}" for i in range(m.shape[0])])
        ax.set_xlabel("encoder state h_j (input word)")
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                v = float(m[i, j])
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6,
                        color="white" if v > 0.55 * float(m.max()) else "black")
    axes[0].set_ylabel("decoder step")
    fig.tight_layout()
    fig.savefig(out / "structure.png", dpi=130, bbox_inches="tight")
    plt.close(fig)
    (out / "structure.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


def format_matrix(rows, label: str) -> str:
    lines = [label, "        " + " ".join(f"{f'x{j + 1}':>6}" for j in range(len(rows[0])))]
    lines += [f"  y{i + 1:<4} " + " ".join(f"{v:6.3f}" for v in row) for i, row in enumerate(rows)]
    return "\n".join(lines)
