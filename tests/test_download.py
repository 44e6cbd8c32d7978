"""`rnnsearch data get` against a local HTTP server on 127.0.0.1 (never the internet)."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import tarfile
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rnnsearch.cli import main
from rnnsearch.io import DataError
from rnnsearch.tools import download
from rnnsearch.tools.download import CATALOGUE, Corpus, DownloadError, Remote, get


class Server:
    """Serves `files` (URL path -> bytes) with Range support; can cut a response short or ignore ranges."""

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.requests: list[tuple[str, str | None]] = []
        self.cut_next: dict[str, int] = {}  # path -> bytes to send before closing, once
        self.ignore_range = False
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                path = self.path.lstrip("/")
                rng = self.headers.get("Range")
                server.requests.append((path, rng))
                if path not in server.files:
                    self.send_error(404, "Not Found")
                    return
                data, start = server.files[path], 0
                if rng and not server.ignore_range:
                    start = int(rng.removeprefix("bytes=").rstrip("-"))
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                cut = server.cut_next.pop(path, None)
                self.wfile.write(body if cut is None else body[:cut])
                self.wfile.flush()
                if cut is not None:
                    self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    with Server() as s:
        yield s


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _toy(server: Server, data: bytes, pinned: bytes | None = None, name: str = "toy") -> dict[str, Corpus]:
    """A one-file corpus whose upstream is example.org; the test server plays the mirror."""
    url = "https://example.org/corpora/v1/words.txt"
    server.files["corpora/v1/words.txt"] = data
    pin = data if pinned is None else pinned
    remote = Remote(url, _sha(pin), len(pin))
    return {name: Corpus(name, "toy_corpus", "a toy corpus", (remote,), download._copy_as({}))}


def test_download_verify_extract_and_cache(server, tmp_path):
    data = b"ein Haus\nzwei H\xc3\xa4user\n" * 500
    cat = _toy(server, data)
    out = get("toy", tmp_path / "data", cache=tmp_path / "cache", mirror=server.url, progress=False,
              catalogue=cat)
    assert out == tmp_path / "data" / "toy_corpus"
    assert (out / "words.txt").read_bytes() == data
    note = (out / "SOURCE.md").read_text()
    assert _sha(data) in note and server.url in note
    assert server.requests == [("corpora/v1/words.txt", None)]
    cached = tmp_path / "cache" / "downloads" / "example.org" / "corpora" / "v1" / "words.txt"
    assert cached.read_bytes() == data
    get("toy", tmp_path / "again", cache=tmp_path / "cache", mirror=server.url, progress=False, catalogue=cat)
    assert len(server.requests) == 1  # served from the cache
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["toy_corpus"]  # no staging left
    cached.write_bytes(b"bit rot")  # a damaged cache entry is noticed and fetched again
    out = get("toy", tmp_path / "third", cache=tmp_path / "cache", mirror=server.url, progress=False,
              catalogue=cat)
    assert (out / "words.txt").read_bytes() == data and len(server.requests) == 2


def test_checksum_mismatch_removes_the_bytes_and_writes_nothing(server, tmp_path):
    cat = _toy(server, b"tampered content!\n", pinned=b"original content!!\n"[:18])
    with pytest.raises(DownloadError, match="SHA-256 mismatch: expected [0-9a-f]{64}, got [0-9a-f]{64}"):
        get("toy", tmp_path / "data", cache=tmp_path / "cache", mirror=server.url, progress=False,
            catalogue=cat)
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())
    assert not any(p.is_file() for p in (tmp_path / "cache").rglob("*"))  # neither .part nor the file stays


def test_size_mismatch_is_reported_before_hashing(server, tmp_path):
    cat = _toy(server, b"short\n", pinned=b"a longer original\n")
    with pytest.raises(DownloadError, match=r"expected 18 bytes, got 6"):
        get("toy", tmp_path / "data", cache=tmp_path / "cache", mirror=server.url, progress=False,
            catalogue=cat)


def test_interrupted_download_is_kept_and_resumed_by_the_next_run(server, tmp_path):
    data = bytes(range(256)) * 1000
    cat = _toy(server, data)
    server.cut_next["corpora/v1/words.txt"] = 100_000
    with pytest.raises(DownloadError, match=r"interrupted after 100,000 bytes.*next run resumes"):
        get("toy", tmp_path / "data", cache=tmp_path / "cache", mirror=server.url, retries=0, progress=False,
            catalogue=cat)
    part = next((tmp_path / "cache").rglob("*.part"))
    assert part.stat().st_size == 100_000
    assert not (tmp_path / "data" / "toy_corpus").exists()
    out = get("toy", tmp_path / "data", cache=tmp_path / "cache", mirror=server.url, retries=0,
              progress=False,
              catalogue=cat)
    assert (out / "words.txt").read_bytes() == data
    assert server.requests[-1] == ("corpora/v1/words.txt", "bytes=100000-")
    assert not part.exists()


def test_interruption_is_resumed_within_one_run(server, tmp_path):
    data = b"x" * 200_000
    cat = _toy(server, data)
    server.cut_next["corpora/v1/words.txt"] = 70_000
    out = get("toy", tmp_path / "data", cache=tmp_path / "cache", mirror=server.url, retries=2,
              progress=False,
              catalogue=cat)
    assert (out / "words.txt").read_bytes() == data
    assert [r for _, r in server.requests] == [None, "bytes=70000-"]


def test_server_that_ignores_range_restarts_cleanly(server, tmp_path):
    data = b"0123456789" * 30_000
    cat = _toy(server, data)
    server.cut_next["corpora/v1/words.txt"] = 1234
    server.ignore_range = True
    out = get("toy", tmp_path / "data", cache=tmp_path / "cache", mirror=server.url, progress=False,
              catalogue=cat)
    assert (out / "words.txt").read_bytes() == data  # not the first 1234 bytes twice


def test_complete_part_file_is_verified_without_refetching(server, tmp_path):
    data = b"complete\n" * 100
    cat = _toy(server, data)
    part = tmp_path / "cache" / "downloads" / "example.org" / "corpora" / "v1" / "words.txt.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(data)  # e.g. killed between the last byte and the rename
    out = get("toy", tmp_path / "data", cache=tmp_path / "cache", mirror=server.url, progress=False,
              catalogue=cat)
    assert (out / "words.txt").read_bytes() == data
    assert server.requests == [("corpora/v1/words.txt", f"bytes={len(data)}-")]


def test_http_errors_and_unknown_names_are_clear(server, tmp_path):
    cat = _toy(server, b"x\n")
    del server.files["corpora/v1/words.txt"]
    with pytest.raises(DownloadError, match=r"words.txt: HTTP 404"):
        get("toy", tmp_path, cache=tmp_path / "c", mirror=server.url, progress=False, catalogue=cat)
    with pytest.raises(download.DataError, match="unknown corpus 'nope' \\(choose from toy\\)"):
        get("nope", tmp_path, catalogue=cat)


def test_unpinned_files_need_explicit_consent(server, tmp_path):
    corpus = dataclasses.replace(CATALOGUE["europarl-it-en"])
    with pytest.raises(download.DataError, match="no SHA-256 is pinned .*--allow-unpinned"):
        get("europarl", tmp_path, catalogue={corpus.name: corpus})
    assert server.requests == []


def test_mirror_from_the_environment(server, tmp_path, monkeypatch):
    cat = _toy(server, b"via the environment\n")
    monkeypatch.setenv("RNNSEARCH_MIRROR", server.url + "/")
    monkeypatch.setenv("RNNSEARCH_CACHE", str(tmp_path / "envcache"))
    out = get("toy", tmp_path / "data", progress=False, catalogue=cat)
    assert (out / "words.txt").read_bytes() == b"via the environment\n"
    assert (tmp_path / "envcache" / "downloads").exists()


def _unpinned(name: str, server: Server, data: bytes) -> dict[str, Corpus]:
    corpus = CATALOGUE[name]
    (remote,) = corpus.files
    server.files[remote.path] = data
    return {name: dataclasses.replace(corpus, files=(Remote(remote.url, _sha(data), len(data)),))}


def test_tatoeba_and_europarl_extraction(server, tmp_path):
    cmn = "\ufeffHi.\t嗨。\tCC-BY 2.0 (France) Attribution: tatoeba.org #538123 (CM) & #891077 (Martha)\n" \
          "Run.\t跑。 \tCC-BY 2.0 (France) Attribution: tatoeba.org #4008918 (JSakuragi)\n"
    out = get("tatoeba-cmn-eng", tmp_path, cache=tmp_path / "c", mirror=server.url, progress=False,
              catalogue=_unpinned("tatoeba-cmn-eng", server, cmn.encode()))
    assert gzip.open(out / "all.en.gz").read().decode() == "Hi.\nRun.\n"
    assert gzip.open(out / "all.zh.gz").read().decode() == "嗨。\n跑。\n"
    assert "#891077" in gzip.open(out / "all.attribution.gz").read().decode().splitlines()[0]

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("fra-eng/fra.txt", "Go.\tVa !\nWho?\tQui ?\n")
        z.writestr("fra-eng/_about.txt", "about the file\n")
    out = get("tatoeba-fra-eng", tmp_path, cache=tmp_path / "c", mirror=server.url, progress=False,
              catalogue=_unpinned("tatoeba-fra-eng", server, buf.getvalue()))
    assert gzip.open(out / "all.fr.gz").read().decode() == "Va !\nQui ?\n"
    assert (out / "original_about.txt").read_text() == "about the file\n"

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for lang, text in (("en", "Resumption of the session\n\n"), ("it", "Ripresa della sessione\nSì\n")):
            info = tarfile.TarInfo(f"europarl-v7.it-en.{lang}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    out = get("europarl", tmp_path, cache=tmp_path / "c", mirror=server.url, progress=False,
              catalogue=_unpinned("europarl-it-en", server, buf.getvalue()))
    # pairs as published
    assert gzip.open(out / "all.en.gz").read().decode() == "Resumption of the session\n\n"
    assert gzip.open(out / "all.it.gz").read().decode() == "Ripresa della sessione\nSì\n"


def test_bad_archive_and_bad_columns_name_the_problem(server, tmp_path):
    with pytest.raises(download.DataError, match=r"cmn.txt:2: expected 3 tab-separated columns, found 2"):
        get("tatoeba-cmn-eng", tmp_path, cache=tmp_path / "c", mirror=server.url, progress=False,
            catalogue=_unpinned("tatoeba-cmn-eng", server, b"a\tb\tc\nd\te\n"))
    with pytest.raises(download.DataError, match="not the expected archive"):
        get("tatoeba-fra-eng", tmp_path, cache=tmp_path / "c", mirror=server.url, progress=False,
            catalogue=_unpinned("tatoeba-fra-eng", server, b"PK not a zip"))
    assert not (tmp_path / "tatoeba_cmn_eng").exists() and not (tmp_path / "tatoeba_fra_eng").exists()
    assert not list(tmp_path.glob(".*partial"))


def test_pinned_catalogue_reproduces_the_development_data(server, tmp_path, shared_data):
    """The real pinned hashes and extraction, with the development copies of the upstream files as mirror."""
    SHARED = shared_data
    for name, folder in (("multi30k", "multi30k"), ("wmt14-newstest", "wmt14_en_fr_newstest"),
                         ("hansards-naacl2003", "hansards_naacl2003_align_gold")):
        corpus = CATALOGUE[name]
        for remote in corpus.files:
            base = remote.url.rsplit("/", 1)[-1]
            local = {"test.e": "test.en", "test.f": "test.fr", "dev.e": "trial.en", "dev.f": "trial.fr",
                     "dev.wa.nonullalign": "trial.wa.nonullalign", "README.test": "original_README.test.txt",
                     "README.training": "original_README.training.txt"}.get(base, base)
            src = SHARED / folder / local
            # sgm kept gzipped
            data = src.read_bytes() if src.exists() else gzip.open(str(src) + ".gz").read()
            server.files[remote.path] = data
        out = get(name, tmp_path, cache=tmp_path / "cache", mirror=server.url, progress=False)
        for path in (SHARED / folder).iterdir():
            if path.name == "PROVENANCE.md":
                continue
            mine = out / path.name
            read = (lambda p: gzip.open(p).read()) if path.suffix == ".gz" else (lambda p: p.read_bytes())
            assert read(mine) == read(path), f"{name}: {path.name} differs from the development copy"


def test_cli_data_get_and_list(server, tmp_path, capsys, monkeypatch):
    assert main(["data", "list"]) == 0
    assert "multi30k" in capsys.readouterr().out
    cat = _toy(server, b"one line\n", name="multi30k")
    monkeypatch.setattr(download, "CATALOGUE", cat)
    assert main(["data", "get", "multi30k", "--dir", str(tmp_path), "--cache", str(tmp_path / "c"),
                 "--mirror", server.url, "--no-progress"]) == 0
    assert "verified and written to" in capsys.readouterr().out
    assert main(["data", "get", "wmt99", "--dir", str(tmp_path)]) == 2
    assert "unknown corpus 'wmt99'" in capsys.readouterr().err


def test_split_keeps_every_source_sentence_in_one_split(tmp_path, capsys):
    src = [f"sentence {i % 40}" for i in range(100)]  # each source 2-3 times with different targets
    tgt = [f"satz {i}" for i in range(100)]
    (tmp_path / "all.en").write_text("\n".join(src) + "\n")
    (tmp_path / "all.de").write_text("\n".join(tgt) + "\n")
    out = tmp_path / "split"
    assert main(["data", "split", "--files", str(tmp_path / "all.en"), str(tmp_path / "all.de"),
                 "--dir", str(out), "--valid", "5", "--test", "6", "--seed", "3"]) == 0
    assert "train" in capsys.readouterr().out
    seen: dict[str, str] = {}
    pairs = set()
    for name in ("train", "valid", "test"):
        en, de = (out / f"{name}.en").read_text().splitlines(), (out / f"{name}.de").read_text().splitlines()
        assert len(en) == len(de)
        for e, d in zip(en, de):
            assert seen.setdefault(e, name) == name  # a source sentence never crosses splits
            pairs.add((e, d))
        if name != "train":
            assert len(set(en)) == {"valid": 5, "test": 6}[name]
    assert pairs == set(zip(src, tgt))  # nothing lost, nothing invented
    again = tmp_path / "again"
    download.split([tmp_path / "all.en", tmp_path / "all.de"], again, valid=5, test=6, seed=3)
    assert (again / "test.de").read_text() == (out / "test.de").read_text()  # seeded


def test_split_errors_name_the_file(tmp_path):
    (tmp_path / "a.en").write_text("x\ny\nz\n")
    (tmp_path / "a.de").write_text("x\ny\n")
    with pytest.raises(download.DataError, match="a.de: 2 lines, but .*a.en has 3"):
        download.split([tmp_path / "a.en", tmp_path / "a.de"], tmp_path / "o")
    (tmp_path / "a.de").write_text("x\ny\nz\n")
    with pytest.raises(download.DataError, match="3 distinct source sentences, too few"):
        download.split([tmp_path / "a.en", tmp_path / "a.de"], tmp_path / "o", valid=1, test=2)
    with pytest.raises(download.DataError, match="distinct extensions"):
        download.split([tmp_path / "a.en", tmp_path / "a.en"], tmp_path / "o", valid=1, test=1)
    assert not (tmp_path / "o").exists()


CONFIG = Path(__file__).resolve().parents[1] / "configs" / "multi30k_de_en.yaml"
SMALL = ["--set", "model.emb=16", "--set", "model.hidden=16", "--set", "model.align=16",
         "--set", "model.maxout=8", "--set", "vocab.size=300", "--set", "train.max_steps=3",
         "--set", "train.batch_size=16", "--set", "train.progress=false", "--set", "train.threads=1",
         "--set", "data.valid_bleu_sentences=8"]


def test_shipped_config_without_its_corpus_says_how_to_fetch_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the config's data/multi30k/... is relative to the working directory
    assert main(["train", str(CONFIG)] + SMALL) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("rnnsearch: error: data/multi30k/train.de.gz: no such file "
                   "(run: rnnsearch data get multi30k)")
    assert not (tmp_path / "runs").exists()
    assert main(["experiment", "length-curve", "--corpus", "multi30k-de-en", "--budget-steps", "1"]) == 2
    assert ("(run: rnnsearch data get multi30k; or give --data DIR holding multi30k/)"
            in capsys.readouterr().err)


def test_readme_path_data_get_then_train_with_no_path_overrides(server, tmp_path, monkeypatch, shared_data):
    """The README's commands as a user runs them: `rnnsearch data get multi30k` (here from a mirror on
    127.0.0.1 serving the development copies), then `rnnsearch train configs/multi30k_de_en.yaml`."""
    for remote in CATALOGUE["multi30k"].files:
        server.files[remote.path] = (shared_data / "multi30k" / remote.url.rsplit("/", 1)[-1]).read_bytes()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RNNSEARCH_CACHE", str(tmp_path / "cache"))
    assert main(["data", "get", "multi30k", "--mirror", server.url, "--no-progress"]) == 0
    assert main(["train", str(CONFIG)] + SMALL) == 0  # sizes shrunk for the test; every path as shipped
    done = tmp_path / "runs" / "multi30k_de_en" / "DONE"
    assert done.exists() and '"step": 3' in done.read_text()


# -- WMT'14 En-Fr: the paper's selection (Schwenk) and the full statmt.org bitexts -------------------

def _tar(members: dict[str, bytes], mode: str = "w:gz") -> bytes:
    """An archive holding `members` in the order given."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _served(name: str, server: Server, contents: dict[str, bytes], keep_unpinned: bool = False):
    """`name` from the catalogue with each upstream file served by the test server as `contents`
    (by the URL's last component) and pinned to it; `keep_unpinned` leaves unpinned files unpinned."""
    corpus, remotes = CATALOGUE[name], []
    for remote in corpus.files:
        data = contents[remote.url.rsplit("/", 1)[-1]]
        server.files[remote.path] = data
        pinned = keep_unpinned and remote.sha256 is None
        remotes.append(remote if pinned else Remote(remote.url, _sha(data), len(data)))
    return {name: dataclasses.replace(corpus, files=tuple(remotes))}


def _newstest_files() -> dict[str, bytes]:
    files = {f"newstest{y}.{lang}": "".join(f"{lang} {y} {i}\n" for i in range(3)).encode()
             for y in (2012, 2013) for lang in ("en", "fr")}
    for kind, lang in (("src", "en"), ("ref", "fr")):
        segs = "".join(f'<seg id="{i}"> {lang} 2014 {i} </seg>\n' for i in range(1, 3))
        files[f"newstest2014-fren-{kind}.{lang}.sgm"] = f'<doc docid="d">\n{segs}</doc>\n'.encode()
    return files


PARTS = ("ep7_pc45", "nc9", "dev08_11", "crawl", "ccb2_pc30", "un2000_pc34")  # the order train.* follows


def _schwenk_files(fr_lines: dict[str, int] | None = None) -> dict[str, bytes]:
    """Tiny bitexts.tgz and dev+test.tgz laid out as Schwenk's: gzipped sides, members in an order
    unlike PARTS (French first, parts reversed), one part without a final newline."""
    members = {}
    for k, part in enumerate(reversed(PARTS)):
        for lang in ("fr", "en"):
            n = (fr_lines or {}).get(part, k + 2) if lang == "fr" else k + 2
            lines = [f"{part} {lang} {i}" for i in range(n)]
            text = "\n".join(lines) + ("" if part == "crawl" else "\n")
            prefix = "./" if part == "nc9" else ""
            members[f"{prefix}bitexts.selected/{part}.{lang}.gz"] = gzip.compress(text.encode())
    dev = {f"dev/{name}.{lang}": "".join(f"{name} {lang} {i}\n" for i in range(n)).encode()
           for name, n in (("ntst1213", 4), ("ntst14", 2)) for lang in ("en", "fr")}
    return {"bitexts.tgz": _tar(members), "dev+test.tgz": _tar(dev), **_newstest_files()}


def test_wmt14_en_fr_is_schwenks_selection_in_one_folder(server, tmp_path):
    cat = _served("wmt14-en-fr", server, _schwenk_files())
    out = get("wmt14-en-fr-paper", tmp_path / "data", cache=tmp_path / "c", mirror=server.url, progress=False,
              catalogue=cat)
    assert out == tmp_path / "data" / "wmt14_en_fr"
    for lang in ("en", "fr"):
        want = [f"{part} {lang} {i}" for k, part in enumerate(reversed(PARTS)) for i in range(k + 2)]
        want = sorted(want, key=lambda line: PARTS.index(line.split()[0]))  # parts in the paper's order
        data = (out / f"train.{lang}.gz").read_bytes()
        assert gzip.decompress(data).decode() == "\n".join(want) + "\n"  # crawl's missing newline added
        assert data[4:8] == b"\0\0\0\0"  # no time stamp: the same bytes on every run
        assert (out / f"dev.{lang}").read_text() == "".join(f"ntst1213 {lang} {i}\n" for i in range(4))
        assert (out / f"test.{lang}").read_text() == "".join(f"ntst14 {lang} {i}\n" for i in range(2))
        assert (out / f"newstest2013.{lang}").read_text() == "".join(f"{lang} 2013 {i}\n" for i in range(3))
        assert (out / f"newstest2014.{lang}").read_text() == f"{lang} 2014 1\n{lang} 2014 2\n"
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no scratch or temporary files
    assert "bitexts.tgz" in (out / "SOURCE.md").read_text()


def test_wmt14_en_fr_sides_that_do_not_align_name_the_part(server, tmp_path):
    cat = _served("wmt14-en-fr", server, _schwenk_files(fr_lines={"nc9": 2}))  # nc9 has 6 English lines
    with pytest.raises(download.DataError, match=r"^bitexts.tgz: bitexts.selected/nc9.fr.gz: 2 lines, but "
                                                r"bitexts.selected/nc9.en.gz has 6; .* line-aligned$"):
        get("wmt14-en-fr", tmp_path, cache=tmp_path / "c", mirror=server.url, progress=False, catalogue=cat)
    assert not (tmp_path / "wmt14_en_fr").exists() and not list(tmp_path.glob(".*partial"))


def test_wmt14_en_fr_archive_without_a_part_is_named(server, tmp_path):
    files = _schwenk_files()
    files["bitexts.tgz"] = _tar({"bitexts.selected/nc9.en.gz": gzip.compress(b"a\n")})
    with pytest.raises(download.DataError, match=r"bitexts.tgz: not the expected archive \(it has no "
                                                r"bitexts.selected/ep7_pc45.en.gz, .*crawl.fr.gz"):
        get("wmt14-en-fr", tmp_path, cache=tmp_path / "c", mirror=server.url, progress=False,
            catalogue=_served("wmt14-en-fr", server, files))
    files["bitexts.tgz"] = b"not an archive at all"
    with pytest.raises(download.DataError, match=r"bitexts.tgz: not the expected archive \("):
        get("wmt14-en-fr", tmp_path, cache=tmp_path / "c2", mirror=server.url, progress=False,
            catalogue=_served("wmt14-en-fr", server, files))


def test_wmt14_en_fr_is_not_pinned_and_says_so(server, tmp_path, capsys):
    corpus = CATALOGUE["wmt14-en-fr"]
    unpinned = [r.url for r in corpus.files if r.sha256 is None]
    assert unpinned == ["http://www-lium.univ-lemans.fr/~schwenk/cslm_joint_paper/data/bitexts.tgz",
                        "http://www-lium.univ-lemans.fr/~schwenk/cslm_joint_paper/data/dev+test.tgz"]
    with pytest.raises(download.DataError, match=r"^wmt14-en-fr: no SHA-256 is pinned for http://www-lium\..*"
                                                r"bitexts.tgz, .*dev\+test.tgz, .*pass --allow-unpinned"):
        get("wmt14-en-fr", tmp_path, mirror=server.url, catalogue=CATALOGUE)
    assert main(["data", "get", "wmt14-en-fr", "--dir", str(tmp_path), "--mirror", server.url]) == 2
    assert "--allow-unpinned" in capsys.readouterr().err
    assert server.requests == [] and not any(tmp_path.iterdir())
    # with consent the unpinned archives are fetched (the pinned newstest files still verified)
    cat = _served("wmt14-en-fr", server, _schwenk_files(), keep_unpinned=True)
    out = get("wmt14-en-fr", tmp_path, cache=tmp_path / "c", mirror=server.url, allow_unpinned=True,
              progress=False, catalogue=cat)
    assert "SHA-256 not pinned" in (out / "SOURCE.md").read_text()
    hint = download.fetch_hint("data/wmt14_en_fr/train.en.gz")
    assert hint == "rnnsearch data get wmt14-en-fr --allow-unpinned"
    assert download.fetch_hint("data/multi30k/train.de.gz") == "rnnsearch data get multi30k"


def test_wmt14_en_fr_full_concatenates_the_statmt_bitexts(server, tmp_path):
    def sides(stem: str, gz: bool = False) -> dict[str, bytes]:
        name = stem.rsplit("/", 1)[-1]
        return {f"{stem}.{lang}" + (".gz" if gz else ""):
                (gzip.compress if gz else bytes)(f"{name} {lang}\n".encode()) for lang in ("en", "fr")}

    files = {"training-parallel-europarl-v7.tgz": _tar(sides("training/europarl-v7.fr-en")),
             "training-parallel-commoncrawl.tgz": _tar(sides("commoncrawl.fr-en")),
             "training-parallel-un.tgz": _tar(sides("un/undoc.2000.fr-en")),
             "training-parallel-nc-v9.tgz": _tar(sides("training/news-commentary-v9.fr-en")),
             "training-giga-fren.tar": _tar(sides("giga-fren.release2.fixed", gz=True), mode="w"),
             **_newstest_files()}
    out = get("wmt14-en-fr-full", tmp_path, cache=tmp_path / "c", mirror=server.url, progress=False,
              catalogue=_served("wmt14-en-fr-full", server, files))
    stems = ["europarl-v7.fr-en", "commoncrawl.fr-en", "undoc.2000.fr-en", "news-commentary-v9.fr-en",
             "giga-fren.release2.fixed"]
    for lang in ("en", "fr"):
        assert gzip.open(out / f"train.{lang}.gz").read().decode() == "".join(f"{s} {lang}\n" for s in stems)
        assert (out / f"dev.{lang}").read_text() == "".join(f"{lang} {y} {i}\n" for y in (2012, 2013)
                                                            for i in range(3))
        assert (out / f"newstest2014.{lang}").exists()


def _hansards_files(broken: str | None = None) -> dict[str, bytes]:
    """Every upstream file of hansards-csc401, tiny: a file's lines name it, with untidy spacing."""
    files = {}
    for remote in CATALOGUE["hansards-csc401"].files:
        name = remote.url.rsplit("/", 1)[-1]
        n = 3 if name.rsplit(".", 1)[0] == broken and name.endswith(".f") else 2
        files[name] = "".join(f"{name}  line\t{i} \n" for i in range(n)).encode()
    return files


def test_hansards_training_corpus_joins_its_files_in_name_order(server, tmp_path):
    remotes = CATALOGUE["hansards-csc401"].files
    folders = [r.url.rsplit("/", 2)[-2] for r in remotes]
    assert folders.count("Training") == 2 * 414 and folders.count("Testing") == 2 * 58
    assert all(r.sha256 and len(r.sha256) == 64 and r.size for r in remotes)  # every file pinned
    out = get("hansards-train", tmp_path / "data", cache=tmp_path / "c", mirror=server.url, progress=False,
              catalogue=_served("hansards-csc401", server, _hansards_files()))
    assert out == tmp_path / "data" / "hansards_csc401_en_fr"
    train_en = gzip.open(out / "train.en.gz", "rt", encoding="utf-8").read().splitlines()
    test_fr = gzip.open(out / "test.fr.gz", "rt", encoding="utf-8").read().splitlines()
    stems = sorted({r.url.rsplit("/", 1)[-1][:-2] for r in remotes if "/Training/" in r.url})
    assert train_en == [f"{stem}.e line {i}" for stem in stems for i in range(2)]
    assert len(test_fr) == 2 * 58
    assert test_fr[0].startswith("hansard.36.2.") and test_fr[0].endswith(".f line 0")


def test_hansards_files_that_disagree_in_length_are_refused(server, tmp_path):
    broken = "hansard.36.1.house.debates.001"
    with pytest.raises(DataError, match=f"Training/{broken}: 2 English lines but 3 French ones"):
        get("hansards-csc401", tmp_path / "data", cache=tmp_path / "c", mirror=server.url, progress=False,
            catalogue=_served("hansards-csc401", server, _hansards_files(broken)))
    assert not (tmp_path / "data" / "hansards_csc401_en_fr").exists()
