"""The beam made visible: `translate --beam-trace` and the explorer's search tree."""

import json

import pytest
from conftest import browser_page
from test_translate import word_model

import rnnsearch
from rnnsearch.cli import main
from rnnsearch.config import ConfigError
from rnnsearch.engine.decode.beamtrace import beam_traces
from rnnsearch.tools.explorer import explorer_html, write_explorer

LINES = ["w1 w2 w3 w4", "w5 w6 w7", "w7 w8 w9 w2 w3", "", "w3 w1 w4 w4 w2 w9"]


def flat(rows):
    return [x for row in rows for x in row]


@pytest.mark.parametrize("beam", [3, 5])
def test_the_trace_ends_in_the_n_best_that_translate_gives(reverse_model, beam):
    model = rnnsearch.load(reverse_model, device="cpu")
    records = beam_traces(model, LINES, beam=beam, n_best=3, precision="fp32")
    wanted = model.translate_n_best(LINES, beam=beam, n_best=3, precision="fp32")
    for record, translations, line in zip(records, wanted, LINES, strict=True):
        assert record["input"] == line and record["source"] == model.src_tok.pieces(model.source_ids(line))
        got = [(h["text"], h["pieces"]) for h in record["n_best"]]
        assert got == [(t.text, t.tokens) for t in translations]
        scores = [h["score"] for h in record["n_best"]]
        assert scores == pytest.approx([t.score for t in translations], abs=1e-3)
        if not line:
            assert record["steps"] == [] and record["target"] == []
            continue
        # the last beam's ended hypotheses, best first, are the n-best
        last = [h for h in record["steps"][-1]["beam"] if h["ended"]][:3]
        assert [h["pieces"][:-1] for h in last] == [h["pieces"] for h in record["n_best"]]
        assert all(h["pieces"][-1] == "</s>" for h in last)
        # the best's rows are the explorer's (translate's attention), </s> row last
        assert record["target"] == translations[0].tokens + ["</s>"]
        assert flat(record["weights"]) == pytest.approx(flat(translations[0].attention), abs=1e-3)
        previous = 1  # the first step grows from <s> alone
        for t, step in enumerate(record["steps"]):
            assert 1 <= len(step["beam"]) <= beam
            scores = [h["score"] for h in step["beam"]]
            assert scores == sorted(scores, reverse=True)
            for h in step["beam"]:
                assert 0 <= h["parent"] < previous
                if t:  # a child extends its parent by one word, or is its parent carried over ended
                    parent = record["steps"][t - 1]["beam"][h["parent"]]
                    assert h["carried"] == parent["ended"]
                    grown = h["pieces"][:-1] == parent["pieces"]
                    assert grown or (h["carried"] and h["pieces"] == parent["pieces"])
                assert len(h["attention"]) == len(record["source"])
                assert sum(h["attention"]) == pytest.approx(1.0, abs=2e-3)
            kept = [c for c in step["candidates"] if c["kept"]]
            assert len(kept) == len(step["beam"]) and len(step["candidates"]) >= len(kept)
            previous = len(step["beam"])
        # the best path runs through parents to the best
        path = record["best_path"]
        assert len(path) == len(record["steps"])
        for t in range(1, len(path)):
            assert record["steps"][t]["beam"][path[t]]["parent"] == path[t - 1]
        assert record["steps"][-1]["beam"][path[-1]]["pieces"] == record["target"]


def test_the_trace_reads_in_reading_order_and_has_no_rows_without_attention(tmp_path):
    reversed_model = rnnsearch.load(word_model(tmp_path, reverse=True), device="cpu")
    record = beam_traces(reversed_model, ["the cat sat on a mat"], beam=2)[0]
    translation = reversed_model.translate(["the cat sat on a mat"], beam=2)[0]
    assert flat(record["weights"]) == pytest.approx(flat(translation.attention), abs=1e-3)  # flipped back
    encdec = rnnsearch.load(word_model(tmp_path, arch="rnnencdec"), device="cpu")
    record = beam_traces(encdec, ["the cat sat"], beam=2)[0]
    assert record["steps"] and record["weights"] is None
    assert all(h["attention"] is None for step in record["steps"] for h in step["beam"])
    assert record["n_best"][0]["text"] == encdec.translate(["the cat sat"], beam=2)[0].text
    with pytest.raises(ConfigError, match="line 2 has 6 source tokens, more than decode.max_source_len"):
        beam_traces(encdec, ["the cat", "the cat sat on a mat"], max_source_len=5)
    with pytest.raises(ValueError, match="no attention"):
        explorer_html([record])


def test_translate_writes_the_trace_and_refuses_bad_use(reverse_model, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("w1 w2 w3\nw4 w5 w6 w7\n")
    trace = tmp_path / "trace.json"
    args = ["translate", "--model", str(reverse_model), "--input", str(tmp_path / "in.txt"), "--beam", "3"]
    assert main(args + ["--beam-trace", str(trace)]) == 0
    assert capsys.readouterr().out.splitlines() == ["w3 w2 w1", "w7 w6 w5 w4"]  # printed as usual
    records = json.loads(trace.read_text())
    assert [r["n_best"][0]["text"] for r in records] == ["w3 w2 w1", "w7 w6 w5 w4"]
    assert records[0]["beam"] == 3 and records[0]["steps"][0]["beam"][0]["pieces"] == ["w3"]
    assert main(args + ["--beam-trace", str(tmp_path / "x.json"), "--format", "html"]) == 2
    assert "--beam-trace records the beam search of plain lines" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()
    assert main(["explore", "--model", str(reverse_model), "--input", str(tmp_path / "in.txt"),
                 "--out", str(tmp_path / "page.html"), "--beam-trace", "--beam", "3"]) == 0
    assert '"best_path"' in (tmp_path / "page.html").read_text()


def test_clicking_a_tree_node_lights_up_its_attention_row(reverse_model, tmp_path):
    model = rnnsearch.load(reverse_model, device="cpu")
    records = beam_traces(model, ["w1 w2 w3 w4", "w5 w6 w7"], beam=3)
    page_path = write_explorer(tmp_path / "tree.html", records)
    with browser_page(page_path.as_uri()) as page:
        steps = records[0]["steps"]
        assert page.locator("#tree").is_visible()
        nodes = page.locator("#tree .node")
        assert nodes.count() == 1 + sum(len(s["beam"]) for s in steps)  # <s> and every beam entry
        assert page.locator("#tree .node.best").count() == 1 + len(steps)  # the best path highlighted
        assert page.locator("#tree .node.ended").count() == sum(h["ended"] for s in steps for h in s["beam"])
        assert page.locator("#tree .edge").count() == sum(len(s["beam"]) for s in steps)
        # a node of the second step that lost: its own attention row lights up the source words
        t, i = 1, len(steps[1]["beam"]) - 1
        hyp = steps[t]["beam"][i]
        node = page.locator(f'#tree .node[data-step="{t + 1}"][data-index="{i}"]')
        assert node.locator("text").first.text_content() == hyp["pieces"][-1]
        node.click()
        shown = page.locator('.tok[data-side="source"]').evaluate_all(
            "els => els.map(e => parseFloat(e.dataset.weight))")
        assert shown == pytest.approx(hyp["attention"], abs=0.005)
        darkest = max(range(len(shown)), key=shown.__getitem__)
        darkest_word = page.locator(f'.tok[data-side="source"][data-index="{darkest}"]')
        bg = darkest_word.evaluate("e => e.style.background")
        v = round(255 * (1 - round(hyp["attention"][darkest], 2)))
        assert abs(int(bg[4:].split(",")[0]) - v) <= 2
        assert " ".join(hyp["pieces"]) in page.locator("#detail").inner_text()
        assert node.evaluate("e => e.classList.contains('selected')")
        # the next sentence draws its own tree; a page without traces has none
        page.locator("body").press("ArrowRight")
        assert nodes.count() == 1 + sum(len(s["beam"]) for s in records[1]["steps"])
        page.goto(write_explorer(tmp_path / "plain.html", [{k: records[0][k] for k in
                                                           ("source", "target", "weights")}]).as_uri())
        assert not page.locator("#tree").is_visible()
