"""The alignment explorer page, checked in a real headless browser (Debian chromium + Playwright)."""

import pytest
from conftest import browser_page

from rnnsearch.tools.explorer import explorer_html, write_explorer

RECORDS = [
    {"source": ["i", "ate", "an", "apple", "yesterday", "."],
     "target": ["我", "昨天", "吃", "了", "一", "个", "苹果", "。", "</s>"],
     "weights": [[0.91, 0.02, 0.02, 0.02, 0.02, 0.01], [0.01, 0.05, 0.01, 0.02, 0.9, 0.01],
                 [0.02, 0.88, 0.03, 0.03, 0.03, 0.01], [0.02, 0.45, 0.03, 0.03, 0.42, 0.05],
                 [0.01, 0.02, 0.93, 0.02, 0.01, 0.01], [0.01, 0.02, 0.2, 0.75, 0.01, 0.01],
                 [0.01, 0.01, 0.02, 0.94, 0.01, 0.01], [0.01, 0.01, 0.01, 0.02, 0.05, 0.9],
                 [0.3, 0.1, 0.1, 0.1, 0.1, 0.3]]},
    {"source": ["a", "b"], "target": ["x", "</s>"], "weights": [[0.25, 0.75], [0.5, 0.5]]},
]


def test_page_is_self_contained_and_escapes_data():
    page = explorer_html(RECORDS)
    assert "http://" not in page and "https://" not in page  # no CDN, no network
    assert "@font-face" in page and len(page) < 100_000  # Chinese glyphs embedded, cut to those used
    assert "<\\/s>" in page and "</s>\"" not in page  # "</s>" cannot close the script tag
    zh = explorer_html(RECORDS, lang="zh")
    assert "上一句" in zh and "lang=\"zh-CN\"" in zh
    with pytest.raises(ValueError, match="weights must be 2 rows of 2"):
        explorer_html([{"source": ["a", "b"], "target": ["x", "y"], "weights": [[1, 0]]}])


def test_clicking_words_highlights_their_attention(tmp_path):
    page_path = write_explorer(tmp_path / "explorer.html", RECORDS)
    with browser_page(page_path.as_uri()) as page:  # works from file://
        assert page.locator("#counter").inner_text() == "sentence 1 / 2"
        # click 昨天: the shown weights are its attention row, and "yesterday" is darkest
        page.locator('.tok[data-side="target"][data-index="1"]').click()
        shown = page.locator('.tok[data-side="source"]').evaluate_all(
            "els => els.map(e => parseFloat(e.dataset.weight))")
        assert shown == pytest.approx(RECORDS[0]["weights"][1], abs=0.005)
        assert "yesterday" in page.locator("#detail").inner_text()
        bg = page.locator('.tok[data-side="source"][data-index="4"]').evaluate("e => e.style.background")
        assert bg == "rgb(25, 25, 25)"  # 0.9 -> round(255 * 0.1): dark grey
        assert page.locator("#heat td.sel").count() == 6  # the row is outlined in the heat map
        # click the source word "ate": the column of weights, shown on the target words
        page.locator('.tok[data-side="source"][data-index="1"]').click()
        column = page.locator('.tok[data-side="target"]').evaluate_all(
            "els => els.map(e => parseFloat(e.dataset.weight))")
        assert column == pytest.approx([row[1] for row in RECORDS[0]["weights"]], abs=0.005)
        # keyboard: → goes to the next sentence
        page.locator("body").press("ArrowRight")
        assert page.locator("#counter").inner_text() == "sentence 2 / 2"
        assert page.locator('.tok[data-side="target"]').all_inner_texts()[0].startswith("x")
        # Chinese text is laid out (not an empty box): the glyph has a real width
        page.locator("body").press("ArrowLeft")
        page.evaluate("() => document.fonts.ready")
        assert page.evaluate("() => document.fonts.check('16px rnnsearch-cjk', '昨天')")  # embedded, no tofu
