"""Heat maps: PNG and SVG written, Chinese rendered with a real CJK font (no tofu)."""

import warnings

from rnnsearch.tools.plotting import cjk_font, plot_attention

WEIGHTS = [[0.9, 0.05, 0.05], [0.1, 0.1, 0.8], [0.2, 0.7, 0.1]]


def test_png_and_svg_with_chinese_labels(tmp_path):
    assert cjk_font()[0][0] != "DejaVu Sans", ("no CJK font: install fonts-noto-cjk or the manimgx-fonts-cjk "
                                               "package")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns "Glyph ... missing from font" for tofu
        png = plot_attention(WEIGHTS, ["i", "ate", "yesterday"], ["我", "昨天", "吃"], tmp_path / "a.png")
        svg = plot_attention(WEIGHTS, ["i", "ate", "yesterday"], ["我", "昨天", "吃"], tmp_path / "a.svg")
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert "<svg" in svg.read_text(encoding="utf-8")[:500]
    assert not list(tmp_path.glob(".*tmp"))
