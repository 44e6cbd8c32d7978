"""`rnnsearch serve`: a real uvicorn server on a free loopback port, started and stopped by each test."""

from __future__ import annotations

import http.client
import json
import random
import socket
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("starlette", reason="serve needs starlette (pip install -e '.[test]')")
uvicorn = pytest.importorskip("uvicorn", reason="serve needs uvicorn (pip install -e '.[test]')")

from conftest import browser_page  # noqa: E402
from serving import LiveServer, Slow  # noqa: E402

from rnnsearch.config import ConfigError  # noqa: E402
from rnnsearch.engine.decode.loading import load  # noqa: E402
from rnnsearch.engine.decode.markup import parse, transfer  # noqa: E402
from rnnsearch.serve import Limits, create_app  # noqa: E402


@pytest.fixture(scope="module")
def translator(reverse_model):
    return load(reverse_model, device="cpu")


@pytest.fixture
def live(translator):
    with LiveServer(create_app(translator, Limits(max_wait_ms=30, max_sentences=8, max_chars=200))) as s:
        yield s


def test_health_and_info(live, translator):
    status, _, body = live.request("/health")
    assert status == 200 and body["status"] == "ok" and body["queued_sentences"] == 0
    status, _, info = live.request("/info")
    assert status == 200
    assert info["vocab"] == {"kind": "word", "source": len(translator.src_tok),
                             "target": len(translator.tgt_tok)}
    assert info["parameters"] == translator.model.num_parameters() and info["arch"] == "rnnsearch"
    assert info["quantize"] == "none"
    assert info["decode"]["beam"] == translator.cfg.decode.beam and info["limits"]["max_sentences"] == 8


def test_translations_equal_those_of_rnnsearch_translate(live, translator):
    sentences = ["w1 w2 w3", "w5 w6 w7 w8", "w9 w4"]
    expected = translator.translate(sentences, beam=3, attention=False)
    status, _, body = live.request("/translate", {"texts": sentences, "beam": 3})
    assert status == 200
    assert [t["text"] for t in body["translations"]] == [e.text for e in expected]
    assert [t["score"] for t in body["translations"]] == pytest.approx([e.score for e in expected], abs=1e-5)
    status, _, body = live.request("/translate", {"text": "w1 w2 w3", "beam": 3})
    assert status == 200 and body["translation"]["text"] == expected[0].text == "w3 w2 w1"
    assert "attention" not in body["translation"] and "alignment" not in body["translation"]


def test_concurrent_requests_are_batched_with_unchanged_results(live, translator):
    sentences = [" ".join(f"w{(i + k) % 9 + 1}" for k in range(3 + i % 4)) for i in range(16)]
    expected = [t.text for t in translator.translate(sentences, beam=3, attention=False)]
    batches_before = live.app.state.models.default.batcher.batches
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda s: live.request("/translate", {"text": s, "beam": 3}), sentences))
    assert [a[0] for a in answers] == [200] * 16
    assert [a[2]["translation"]["text"] for a in answers] == expected
    assert live.app.state.models.default.batcher.batches - batches_before < 16  # requests shared batches


def test_score_gives_what_the_translator_scores(live, translator):
    status, _, body = live.request("/score", {"source": "w1 w2 w3", "target": "w3 w2 w1", "per_token": True})
    want = translator.score(["w1 w2 w3"], ["w3 w2 w1"], per_token=True)[0]
    assert status == 200 and body["score"]["log_prob"] == pytest.approx(want.log_prob, abs=1e-5)
    assert body["score"]["pieces"] == ["w3", "w2", "w1", "</s>"]
    assert len(body["score"]["token_log_probs"]) == 4
    status, _, body = live.request("/score", {"sources": ["w1 w2", "w4"], "targets": ["w2 w1", "w4"]})
    assert status == 200 and [s["tokens"] for s in body["scores"]] == [3, 2]
    bad = ((b'{"source": "w1"}', None, 'give "source" and "target"'),
           (b'{"sources": ["w1"], "targets": []}', "targets", "non-empty list"),
           (b'{"sources": ["w1", "w2"], "targets": ["w1"]}', "targets", "2 sources but 1"),
           (b'{"source": "w1", "target": ""}', "target", "is empty"),
           (b'{"source": "w1", "target": "w1", "scores": 1}', "scores", "unknown field"))
    for raw, field, message in bad:
        status, _, body = live.request("/score", raw=raw)
        assert status == 422 and body.get("field") == field and message in body["error"], body


def test_prefixes_force_the_start_of_translations(live, translator):
    status, _, body = live.request("/translate", {"text": "w1 w2 w3 w4", "prefix": "w1 w1", "beam": 3})
    want = translator.translate(["w1 w2 w3 w4"], beam=3, prefixes=["w1 w1"])[0]
    assert status == 200 and body["translation"]["text"] == want.text and want.text.startswith("w1 w1")
    status, _, body = live.request("/translate", {"texts": ["w1 w2", "w5 w6"], "prefixes": [None, "w9"]})
    got = [t["text"] for t in body["translations"]]
    assert status == 200 and got == [t.text for t in translator.translate(["w1 w2", "w5 w6"],
                                                                         prefixes=[None, "w9"])]
    assert got[1].startswith("w9") and got[0] == translator.translate(["w1 w2"])[0].text


def test_samples_are_drawn_seeded_and_limited(live, translator):
    request = {"text": "w1 w2 w3 w4", "sample": 4, "temperature": 1.3, "seed": 2, "alignment": True}
    status, _, body = live.request("/translate", request)
    assert status == 200
    t = body["translation"]
    want = translator.translate_n_best(["w1 w2 w3 w4"], sample=4, temperature=1.3, seed=2)[0]
    assert [e["text"] for e in t["samples"]] == [s.text for s in want] and t["text"] == want[0].text
    assert all("alignment" in e for e in t["samples"]) and "n_best" not in t
    assert live.request("/translate", request)[2] == body  # the same seed, the same draws


def test_attention_and_n_best(live, translator):
    status, _, body = live.request("/translate",
                                   {"text": "w1 w2 w3 w4", "beam": 4, "n_best": 3, "attention": True})
    assert status == 200
    t = body["translation"]
    assert len(t["n_best"]) == 3 and t["n_best"][0]["text"] == t["text"]
    assert t["n_best"][0]["score"] >= t["n_best"][1]["score"] >= t["n_best"][2]["score"]
    att = t["attention"]
    assert att["source"] == ["w1", "w2", "w3", "w4"] and att["target"] == t["tokens"] + ["</s>"]
    assert len(att["weights"]) == len(att["target"])
    assert all(abs(sum(row) - 1) < 1e-4 and len(row) == 4 for row in att["weights"])
    forced = translator.translate(["w1 w2 w3 w4"], beam=4)[0]
    assert att == forced.attention_json()


def test_alignment_on_request(live, translator):
    """"alignment": true adds Translation.alignment, [source word, target word] pairs, to every
    translation and every n-best entry; the translations stay those without it."""
    sentences = ["w1 w2 w3", "w5 w6 w7 w8"]
    expected = translator.translate(sentences, beam=3)
    status, _, body = live.request("/translate", {"texts": sentences, "beam": 3, "alignment": True})
    assert status == 200
    for got, want in zip(body["translations"], expected):
        assert got["text"] == want.text and "attention" not in got
        assert got["alignment"] == [list(link) for link in want.alignment]
    # the reversal model: α_i (the default row) points at the mirrored source word
    assert body["translations"][0]["alignment"] == [[0, 2], [1, 1], [2, 0]]
    status, _, body = live.request("/translate", {"text": "w1 w2 w3 w4", "beam": 3, "n_best": 2,
                                                  "alignment": True})
    nbest = translator.translate_n_best(["w1 w2 w3 w4"], beam=3, n_best=2)[0]
    t = body["translation"]
    assert status == 200 and t["alignment"] == [list(link) for link in nbest[0].alignment]
    assert [e["alignment"] for e in t["n_best"]] == [[list(x) for x in h.alignment] for h in nbest]


def test_saliency_links_on_request(live, translator, reverse_model):
    """"links": "saliency" takes the links (alignment, html tags) from gradient x input saliency, as
    `translate --alignment --links saliency` does; the text is the same; an int8 model refuses it by
    name, and a model without an alignment head refuses "head"."""
    rng = random.Random(0)  # long sentences, where the two kinds of links part somewhere
    sentences = [" ".join(f"w{rng.randint(1, 9)}" for _ in range(8)) for _ in range(24)]
    want = translator.translate(sentences, beam=3, links="saliency")
    attention = translator.translate(sentences, beam=3)
    assert [t.alignment for t in want] != [t.alignment for t in attention]
    for k in range(0, len(sentences), 8):
        status, _, body = live.request("/translate", {"texts": sentences[k:k + 8], "beam": 3,
                                                      "alignment": True, "links": "saliency"})
        assert status == 200
        assert [t["text"] for t in body["translations"]] == [t.text for t in want[k:k + 8]]
        assert [t["alignment"] for t in body["translations"]] == [[list(x) for x in t.alignment]
                                                                  for t in want[k:k + 8]]
    status, _, body = live.request("/translate", {"text": "w1 w2 w3", "beam": 3, "alignment": True,
                                                  "links": "saliency"})  # one text: the same links
    one = translator.translate(["w1 w2 w3"], beam=3, links="saliency")[0]
    assert body["translation"]["alignment"] == [list(x) for x in one.alignment]
    marked = parse("<b>w1</b> w2 w3")
    t = translator.translate([marked.text], links="saliency")[0]
    status, _, body = live.request("/translate", {"text": "<b>w1</b> w2 w3", "format": "html",
                                                  "links": "saliency"})
    assert status == 200 and body["translation"]["text"] == transfer(marked, t.text, t.alignment)
    mean = translator.translate(sentences[:8], beam=3, links="mean")
    status, _, body = live.request("/translate", {"texts": sentences[:8], "beam": 3, "alignment": True,
                                                  "links": "mean"})
    assert status == 200
    assert [t["alignment"] for t in body["translations"]] == [[list(x) for x in t.alignment] for t in mean]
    for bad in ("yes", 1, True, ["mean"]):
        status, _, body = live.request("/translate", {"text": "w1", "links": bad})
        assert status == 422 and body["field"] == "links" and "expected 'attention' | 'head'" in body["error"]
    status, _, body = live.request("/translate", {"text": "w1", "links": "head"})
    assert status == 422 and body["field"] == "links" and "has none (model.alignment_head)" in body["error"]
    int8 = load(reverse_model, device="cpu", quantize="int8")
    with pytest.raises(ConfigError, match="links: saliency takes gradients"):
        int8.translate(["w1 w2"], links="saliency")
    with LiveServer(create_app(int8, Limits(max_wait_ms=5))) as server:
        status, _, body = server.request("/translate", {"text": "w1 w2", "alignment": True,
                                                        "links": "saliency"})
        assert status == 422 and body["field"] == "links" and "int8" in body["error"]
        assert server.request("/translate", {"text": "w1 w2", "alignment": True})[0] == 200


def test_html_format_carries_tags_to_the_aligned_words(live, translator):
    """"format": "html": the model reads the text without its tags, and each tag comes back around
    the target words aligned to the words it enclosed (the reversal model mirrors them), every tag
    once, byte for byte; a line without tags is translated as it is, one without words keeps its
    tags alone (an empty text is refused as in the text format)."""
    lines = ['w1 <b>w2</b> <a href="x?a=1&amp;b=2">w3</a>', "w4 w5 w6", "<br/>"]  # 3-7 words, as trained
    status, _, body = live.request("/translate", {"texts": lines, "beam": 3, "format": "html"})
    assert status == 200
    got = [t["text"] for t in body["translations"]]
    assert got[0] == '<a href="x?a=1&amp;b=2">w3</a> <b>w2</b> w1'
    assert got[1] == translator.translate(["w4 w5 w6"], beam=3)[0].text == "w6 w5 w4"
    assert got[2] == "<br/>"
    status, _, body = live.request("/translate", {"text": "<i>w6</i> w7 w8", "beam": 3, "n_best": 2,
                                                  "format": "html"})
    assert status == 200 and body["translation"]["text"] == "w8 w7 <i>w6</i>"
    assert all(e["text"].count("<i>") == 1 for e in body["translation"]["n_best"])
    status, _, body = live.request("/translate", {"text": "w1", "format": "xml"})
    assert status == 422 and body["field"] == "format"


BAD = [
    (b"{not json", 400, None, "malformed JSON"),
    (b"\xff\xfe", 400, None, "not UTF-8"),
    (b"[1, 2]", 422, None, "expected a JSON object"),
    (b"{}", 422, None, "exactly one of"),
    (b'{"text": "w1", "texts": ["w2"]}', 422, "text", "exactly one of"),
    (b'{"text": 5}', 422, "text", "must be a string, got int"),
    (b'{"text": null}', 422, "text", "must be a string"),
    (b'{"text": "   "}', 422, "text", "is empty"),
    (b'{"texts": "w1 w2"}', 422, "texts", "must be a list"),
    (b'{"texts": []}', 422, "texts", "texts is empty"),
    (b'{"texts": ["w1", 7]}', 422, "texts[1]", "must be a string"),
    (b'{"texts": ["w1", ""]}', 422, "texts[1]", "is empty"),
    (json.dumps({"texts": ["w1"] * 9}).encode(), 422, "texts", "limit is 8"),
    (json.dumps({"text": "w1 " * 100}).encode(), 422, "text", "the limit is 200"),
    (b'{"text": "w1", "beam": 0}', 422, "beam", "beam: must be in 1..256, got 0"),
    (b'{"text": "w1", "beam": 33}', 422, "beam", "from 1 to 32 here, got 33"),
    (b'{"text": "w1", "beam": "5"}', 422, "beam", "beam: expected int, got '5'"),
    (b'{"text": "w1", "beam": true}', 422, "beam", "expected int, got True"),
    (b'{"text": "w1", "beam": 2.5}', 422, "beam", "expected int, got 2.5"),
    (b'{"text": "w1", "beam": 2, "n_best": 3}', 422, "n_best", "n_best: must be in 1..beam (2), got 3"),
    (b'{"text": "w1", "n_best": 0}', 422, "n_best", "n_best: must be in 1..beam"),
    (b'{"text": "w1", "attention": "yes"}', 422, "attention", "true or false"),
    (b'{"text": "w1", "sample": 33}', 422, "sample", "sample: must be from 0 to 32 here, got 33"),
    (b'{"texts": ["w1"], "prefix": "w2"}', 422, "prefix", "prefix goes with text; give prefixes"),
    (b'{"texts": ["w1", "w2"], "prefixes": ["w2"]}', 422, "prefixes", "a list of 2 (a string or null each)"),
    (b'{"texts": ["w1", "w2"], "prefixes": ["w2", ""]}', 422, "prefixes", "prefixes[1] must be a non-empty"),
    (b'{"text": "w1", "prefix": 3}', 422, "prefix", "prefix must be a non-empty string"),
    (json.dumps({"text": "w1", "prefix": "w2 " * 14}).encode(), 422, "prefix", "14 pieces, but its"),
    (b'{"text": "w1", "sample": 2, "temperature": 0}', 422, "temperature", "temperature: must be > 0"),
    (b'{"text": "w1", "sample": 2, "top_p": 0}', 422, "top_p", "top_p: must be in (0, 1]"),
    (b'{"text": "w1", "alignment": 1}', 422, "alignment", "alignment must be true or false"),
    (b'{"text": "w1", "beams": 5}', 422, "beams", "unknown field 'beams'"),
    (b'{"text": "\\ud800 w1"}', 422, "text", "unpaired surrogate"),
]


@pytest.mark.parametrize("raw, status, field, message", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_requests_get_a_json_error_naming_the_field(live, raw, status, field, message):
    got, _, body = live.request("/translate", raw=raw)
    assert got == status, body
    assert body["field"] == field and message in body["error"]


def test_huge_bodies_are_refused_with_or_without_content_length(live):
    with socket.create_connection(("127.0.0.1", live.port), timeout=30) as sock:  # refused before it is sent
        sock.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 5000000\r\n\r\n" + b'{"text": "' + b"w1 " * 1000)
        answer = b""
        while b"}" not in answer and (chunk := sock.recv(65536)):
            answer += chunk
        answer = answer.decode()
    assert answer.startswith("HTTP/1.1 413") and "over 1,048,576 bytes" in answer
    conn = http.client.HTTPConnection("127.0.0.1", live.port, timeout=30)
    chunks = (b"x" * 65536 for _ in range(40))  # 2.5 MB, chunked: no Content-Length to trust
    conn.request("POST", "/translate", body=chunks, encode_chunked=True,
                 headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    assert response.status == 413
    conn.close()
    assert live.request("/health")[0] == 200


def test_unicode_edge_cases_are_translated(live):
    texts = ["w1 🐈 w2", "مرحبا w3", "w4 e\u0301\u0301", "w5\x00w6", "\u202ew7 w8\u202c", "\x00"]
    status, _, body = live.request("/translate", {"texts": texts, "attention": True})
    assert status == 200 and len(body["translations"]) == len(texts)
    assert body["translations"][-1]["text"] == ""  # nothing left after cleaning: an empty translation


def test_routes_and_methods(live):
    status, _, body = live.request("/translate", method="GET")
    assert status == 405 and body["field"] is None
    status, _, body = live.request("/nope")
    assert status == 404 and "error" in body
    with urllib.request.urlopen(live.url + "/", timeout=30) as r:
        page = r.read().decode()
    assert r.status == 200 and 'id="live"' in page and "rnnsearchExplorer" in page


def test_full_queue_answers_503_with_retry_after(translator):
    limits = Limits(max_queue=2, max_batch=1, max_wait_ms=0)
    with LiveServer(create_app(Slow(translator, 0.4), limits)) as live:
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda k: live.request("/translate", {"text": f"w{k + 1} w2"}), range(8)))
        statuses = sorted(a[0] for a in answers)
        assert statuses.count(200) >= 2 and statuses.count(503) >= 1 and set(statuses) <= {200, 503}
        busy = next(a for a in answers if a[0] == 503)
        assert int(busy[1]["retry-after"]) >= 1 and "server busy" in busy[2]["error"]
        deadline = time.time() + 10
        while live.request("/health")[2]["queued_sentences"]:
            assert time.time() < deadline
            time.sleep(0.05)
        assert live.request("/translate", {"text": "w1 w2"})[0] == 200


def test_a_failing_batch_is_a_500_and_the_server_lives_on(translator):
    with LiveServer(create_app(Slow(translator, 0.0), Limits(max_wait_ms=0))) as live:
        status, _, body = live.request("/translate", {"text": "boom w1"})
        assert status == 500 and "RuntimeError" in body["error"]
        status, _, body = live.request("/translate", {"text": "w1 w2 w3"})
        assert status == 200 and body["translation"]["text"] == translator.translate(["w1 w2 w3"])[0].text


def test_live_page_in_a_browser(live):
    answer = live.request("/translate", {"text": "w1 w2 w3", "attention": True})[2]
    expected = answer["translation"]["attention"]
    with browser_page(live.url + "/") as page:
        page.fill("#input", "w1 w2 w3")
        page.click("#go")
        page.wait_for_selector('.tok[data-side="target"]')
        assert page.locator('.tok[data-side="source"]').all_inner_texts() == ["w1", "w2", "w3"]
        page.locator('.tok[data-side="target"][data-index="0"]').click()  # "w3"
        shown = page.locator('.tok[data-side="source"]').evaluate_all(
            "els => els.map(e => parseFloat(e.dataset.weight))")
        assert shown == pytest.approx(expected["weights"][0], abs=0.006)
        darkest = max(range(3), key=lambda j: expected["weights"][0][j])
        assert f"“{expected['source'][darkest]}”" in page.locator("#detail").inner_text()
        page.fill("#input", "w1 " * 150)  # over the server's 200-character limit: the error is shown
        page.click("#go")
        page.wait_for_function("document.getElementById('status').textContent.includes('limit')")


@pytest.mark.parametrize("route", ["/translate", "/detect", "/v2/translate", "/v2/languages", "/v2/usage"])
def test_deeply_nested_json_is_a_client_error(live, route):
    # 100,000 levels fit the body limit and overflow Python's JSON parser (RecursionError)
    for raw in (b"[" * 100_000 + b"]" * 100_000, b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"):
        status, _, body = live.request(route, raw=raw)
        assert 400 <= status < 500 and ("error" in body or "message" in body), (status, body)
    assert live.request("/translate", {"text": "w1 w2"})[0] == 200


def test_a_stalled_client_does_not_hold_up_the_others(live):
    with socket.create_connection(("127.0.0.1", live.port), timeout=30) as sock:
        # headers and half the body, then nothing: the others must still be served meanwhile
        sock.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 40\r\n\r\n" + b'{"text": "w1')
        for _ in range(3):
            status, _, body = live.request("/translate", {"text": "w3 w4"})
            assert status == 200 and body["translations"][0]["text"]
        sock.sendall(b' w2"}' + b" " * 23)  # the rest arrives late: still answered
        answer = sock.recv(65536).decode()
    assert answer.startswith("HTTP/1.1 200"), answer[:200]


def test_a_beam_over_the_servers_limit_stops_the_command_with_one_line(reverse_model, capsys):
    """`serve --beam` is checked once, where the server resolves its decoding options: 0 by the
    option's own range, 40 by the server's max_beam; each one error line, exit 2, nothing served."""
    from rnnsearch.cli import main

    for beam, message in ((40, "beam: must be from 1 to 32 (the server's max_beam), got 40"),
                          (0, "beam: must be in 1..256, got 0")):
        assert main(["serve", "--model", str(reverse_model), "--beam", str(beam), "--port", "0"]) == 2
        errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
        assert len(errors) == 1 and message in errors[0], errors
