"""Bad requests by the hundred (Hypothesis): random JSON of every shape, the APIs' own field names
with values of the wrong type, random bytes under every content type, sent to every POST route of
a live server. Each gets a 4xx (or a 200) with a JSON body, never a 500, and the server stays up.

The example budget is RNNSEARCH_FUZZ_EXAMPLES (default 150, the CI's, the same examples each run);
RNNSEARCH_FUZZ_RANDOM=1 draws new ones (docs/robustness.md has the nightly command)."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request

import pytest

pytest.importorskip("starlette", reason="serve needs starlette (pip install -e '.[test]')")
pytest.importorskip("uvicorn", reason="serve needs uvicorn (pip install -e '.[test]')")
hypothesis = pytest.importorskip("hypothesis", reason="pip install -e '.[test]'")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from serving import LiveServer  # noqa: E402

from rnnsearch.engine.decode.loading import load  # noqa: E402
from rnnsearch.serve import Access, Limits, create_app  # noqa: E402

EXAMPLES = int(os.environ.get("RNNSEARCH_FUZZ_EXAMPLES", "150"))
RANDOM = os.environ.get("RNNSEARCH_FUZZ_RANDOM") == "1"  # new examples each run (else CI's fixed ones)
ROUTES = ["/translate", "/detect", "/v2/translate", "/v2/languages", "/v2/usage"]
FIELDS = ["q", "source", "target", "format", "alternatives", "api_key", "text", "texts", "beam", "n_best",
          "attention", "alignment", "model", "target_lang", "source_lang", "tag_handling", "type",
          "auth_key"]
CONTENT_TYPES = ["application/json", "application/x-www-form-urlencoded", "multipart/form-data",
                 "multipart/form-data; boundary=xyz", "text/plain", "application/json; charset=latin-1", None]
ANSWERS = {200, 400, 403, 413, 422, 429, 456, 503}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
    | st.text(max_size=40) | st.sampled_from(["de", "en", "auto", "html", "EN-US", "w1 w2", "", "xx"]),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20)
api_objects = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), json_values, max_size=6)
VALID = [{"q": "w1 w2", "source": "de", "target": "en"},
         {"q": ["w1", "w2 w3"], "source": "auto", "target": "en"},
         {"text": "w1 w2"}, {"texts": ["w1", "w2"], "beam": 2},
         {"text": ["w1 w2"], "target_lang": "EN-US"}]
# a valid request of one API with one or two fields changed: reaches the code past the first check
near_valid = st.builds(lambda base, change: {**base, **change}, st.sampled_from(VALID),
                       st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=2))
near_valid_json = st.tuples(near_valid.map(lambda o: json.dumps(o).encode()), st.just("application/json"))
bodies = (near_valid.map(lambda o: json.dumps(o).encode())
          | api_objects.map(lambda o: json.dumps(o).encode())
          | json_values.map(lambda v: json.dumps(v).encode())
          | st.binary(max_size=300)
          | st.lists(st.tuples(st.sampled_from(FIELDS), st.text(max_size=20)), max_size=6).map(
              lambda pairs: "&".join(f"{k}={v}" for k, v in pairs).encode("utf-8", "surrogatepass")))
# half the requests a near-valid JSON one, half anything under any content type
requests = near_valid_json | st.tuples(bodies, st.sampled_from(CONTENT_TYPES))


@pytest.fixture(scope="module")
def live(reverse_model):
    app = create_app({"de-en": load(reverse_model, device="cpu")},
                     Limits(max_wait_ms=1, max_sentences=8, max_chars=200, max_body=4096),
                     access=Access(char_quota=10**9))
    with LiveServer(app) as server:
        yield server


def send(url: str, body: bytes, content_type: str | None) -> tuple[int, bytes]:
    headers = {"Content-Type": content_type} if content_type else {}
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          derandomize=not RANDOM)
@given(route=st.sampled_from(ROUTES), request=requests)
def test_every_bad_request_gets_a_json_4xx_and_the_server_lives_on(live, route, request):
    status, answer = send(live.url + route, *request)
    hypothesis.event(f"{route} {status}")  # pytest --hypothesis-show-statistics: what was reached
    assert status in ANSWERS, (status, answer[:300])
    assert isinstance(json.loads(answer), (dict, list))


def test_the_server_is_healthy_after_the_fuzzing(live):
    status, answer = send(live.url + "/translate", json.dumps({"q": "w1 w2 w3", "source": "de",
                                                                "target": "en"}).encode(), "application/json")
    assert status == 200 and json.loads(answer) == {"translatedText": "w3 w2 w1"}
