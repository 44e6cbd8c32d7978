"""Attention heat maps in the manner of the paper's Figure 3, with CJK text rendered.

Source words run along the top (x), target words down the side (y); a cell's grey
level is α_ij (white 0, black 1). Chinese needs a CJK font: a system one (Noto/Source
Han/WenQuanYi/PingFang/YaHei/SimHei) when installed, else the Noto Sans CJK that the
``manimgx-fonts-cjk`` dependency ships.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

CJK_FAMILIES = ["Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "Source Han Sans CN",
                "WenQuanYi Micro Hei", "WenQuanYi Zen Hei", "PingFang SC", "Hiragino Sans GB",
                "Microsoft YaHei", "SimHei", "Noto Sans CJK JP"]


def _matplotlib():
    import logging
    import sys

    import matplotlib

    if "matplotlib.pyplot" not in sys.modules:  # a notebook's inline backend stays; scripts get Agg
        matplotlib.use("Agg")
    # The bundled variable CJK font has no "normal" weight entry; matplotlib says so on every lookup.
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
    import matplotlib.pyplot as plt

    return matplotlib, plt


@functools.lru_cache(maxsize=1)
def cjk_font() -> tuple[list[str], bool]:
    """(font family list for matplotlib, whether the glyphs are thin and need a stroke)."""
    _matplotlib()
    from matplotlib import font_manager

    installed = {f.name for f in font_manager.fontManager.ttflist}
    for family in CJK_FAMILIES:
        if family in installed:
            return [family, "DejaVu Sans"], False
    try:
        import manimgx_fonts_cjk

        path = Path(manimgx_fonts_cjk.__file__).with_name("NotoSansCJK-VF.otf.ttc")
        font_manager.fontManager.addfont(str(path))
        # The variable font's default instance is its thinnest weight: thicken with a stroke.
        return ["Noto Sans CJK SC", "DejaVu Sans"], True
    except (ImportError, OSError, RuntimeError):
        return ["DejaVu Sans"], False


def _save(fig, path: str | Path) -> Path:
    """Write the figure atomically, in the format its extension names (png, svg, pdf)."""
    from rnnsearch.io import atomic_write

    _, plt = _matplotlib()
    fig.tight_layout()
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower() or "png"
    atomic_write(path, lambda tmp: fig.savefig(tmp, format=fmt, dpi=150))
    plt.close(fig)
    return path


def draw_attention(ax, weights: Sequence[Sequence[float]], source: Sequence[str], target: Sequence[str],
                   title: str | None = None) -> None:
    """Draw a grey-scale attention matrix on matplotlib axes `ax` (rows = target words, α 0 white,
    1 black)."""
    from matplotlib import patheffects

    families, thin = cjk_font()
    effects = [patheffects.withStroke(linewidth=0.7, foreground="black")] if thin else None
    ax.imshow(weights, cmap="gray_r", vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(source)))
    ax.set_xticklabels(source, rotation=60, ha="left", fontfamily=families, fontsize=11, path_effects=effects)
    ax.set_yticks(range(len(target)))
    ax.set_yticklabels(target, fontfamily=families, fontsize=11, path_effects=effects)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    if title:
        ax.set_xlabel(title, fontfamily=families, path_effects=effects)


def plot_attention(weights: Sequence[Sequence[float]], source: Sequence[str], target: Sequence[str],
                   path: str | Path, title: str | None = None) -> Path:
    """Write a grey-scale attention matrix (PNG or SVG by extension); rows = target words."""
    _, plt = _matplotlib()
    rows, cols = len(target), len(source)
    fig, ax = plt.subplots(figsize=(max(3.0, 0.55 * cols + 1.5), max(2.5, 0.45 * rows + 1.2)))
    draw_attention(ax, weights, source, target, title)
    return _save(fig, path)


def plot_length_curves(curves: dict[str, list[dict]], path: str | Path,
                       title: str = "BLEU by source sentence length") -> Path:
    """One line per system: BLEU of each length bucket (paper Figure 2). Buckets as from
    :func:`rnnsearch.engine.decode.evaluate.bleu_by_length`; empty buckets leave a gap."""
    matplotlib, plt = _matplotlib()
    families, thin = cjk_font()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    labels = None
    for name, buckets in curves.items():
        labels = [b["bucket"] for b in buckets]
        ys = [float("nan") if b["bleu"] is None else b["bleu"] for b in buckets]
        ax.plot(range(len(buckets)), ys, marker="o", label=name)
    if labels:
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels)
    ax.set_xlabel("source sentence length (words)")
    ax.set_ylabel("BLEU")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(prop={"family": families})
    return _save(fig, path)


def plot_training_curves(curves: dict[str, list[dict]], path: str | Path, budget: str) -> Path:
    """Validation BLEU (or loss) against training step, one line per system: is anything undertrained?
    `budget` names what every system was given, for the title."""
    _, plt = _matplotlib()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    use_bleu = all(r.get("valid_bleu") is not None for c in curves.values() for r in c)
    for name, rows in curves.items():
        ax.plot([r["step"] for r in rows], [r["valid_bleu" if use_bleu else "valid_loss"] for r in rows],
                marker=".", label=name)
    ax.set_xlabel("training step")
    ax.set_ylabel("validation BLEU (greedy)" if use_bleu else "validation loss")
    ax.set_title(f"training curves ({budget} each)")
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def write_by_length(out_dir, systems: list[dict]) -> list[str]:
    """by_length.csv, by_length.json and by_length.png (one curve per system) in out_dir."""
    import csv
    import io
    import json

    from rnnsearch.io import atomic_write_text

    out = Path(out_dir)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["system", "bucket", "sentences", "bleu"])
    for sys_ in systems:
        for b in sys_["by_length"]:
            w.writerow([sys_["label"], b["bucket"], b["sentences"], "" if b["bleu"] is None else b["bleu"]])
    atomic_write_text(out / "by_length.csv", buf.getvalue())
    atomic_write_text(out / "by_length.json", json.dumps(
        [{"label": s["label"], "by_length": s["by_length"]} for s in systems],
        indent=1, ensure_ascii=False) + "\n")
    plot_length_curves({s["label"]: s["by_length"] for s in systems}, out / "by_length.png")
    return [str(out / n) for n in ("by_length.csv", "by_length.json", "by_length.png")]
