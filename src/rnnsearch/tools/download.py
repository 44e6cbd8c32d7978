"""``rnnsearch data get``: the standard corpora, downloaded, verified and laid out for training.

Every corpus is a list of upstream files and an extraction step that writes the same layout as
the project's development data (one folder per corpus, line-aligned ``<split>.<lang>[.gz]``).

Downloads go to a cache directory (``--cache``, ``$RNNSEARCH_CACHE``, default
``~/.cache/rnnsearch``) as ``NAME.part`` first; an interrupted download is resumed with an HTTP
Range request on the next run, and only a file whose size and SHA-256 match the pinned values is
renamed into place. A mismatch removes the bad bytes and says so. ``--mirror URL`` (or
``$RNNSEARCH_MIRROR``) fetches the same paths from another base address: the upstream URL's
host is replaced, its path kept.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import http.client
import itertools
import logging
import os
import re
import shutil
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rnnsearch.io import DataError, atomic_write, atomic_write_text, check_aligned, default_cache, read_lines

log = logging.getLogger("rnnsearch")

CHUNK = 1 << 16


@dataclass(frozen=True)
class Remote:
    """One upstream file: its address, and the size and SHA-256 it must have (None: not pinned)."""

    url: str
    sha256: str | None = None
    size: int | None = None

    @property
    def path(self) -> str:
        """The URL's path, which a mirror serves under its own base address."""
        return urllib.parse.urlsplit(self.url).path.lstrip("/")


@dataclass(frozen=True)
class Corpus:
    name: str
    folder: str
    about: str
    files: tuple[Remote, ...]
    extract: Callable[[dict[str, Path], Path], None]  # (downloaded files by URL, output folder)


# -- extraction steps -------------------------------------------------------------------------------

def _write_bytes(path: Path, data: bytes) -> None:
    def write(tmp: str) -> None:
        Path(tmp).write_bytes(data)

    atomic_write(path, write)


def _write_gz(path: Path, text: str) -> None:
    """Deterministic gzip (no name, no time stamp), atomically."""
    def write(tmp: str) -> None:
        with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
            f.write(text.encode("utf-8"))

    atomic_write(path, write)


def _copy_as(renames: dict[str, str]) -> Callable[[dict[str, Path], Path], None]:
    """Copy files unchanged, renaming by the last component of their URL."""
    def extract(files: dict[str, Path], out: Path) -> None:
        for url, path in files.items():
            name = url.rsplit("/", 1)[-1]
            _write_bytes(out / renames.get(name, name), path.read_bytes())

    return extract


_SEG = re.compile(r"<seg[^>]*>(.*)</seg>", re.IGNORECASE)


def sgm_segments(text: str, source: str) -> list[str]:
    """The text of every ``<seg>`` element of a WMT SGML file, stripped, in file order."""
    segs = [m.group(1).strip() for m in map(_SEG.search, text.splitlines()) if m]
    if not segs:
        raise DataError(f"{source}: no <seg> elements found (not a WMT SGML file?)")
    return segs


def _extract_newstest(files: dict[str, Path], out: Path) -> None:
    for url, path in files.items():
        name = url.rsplit("/", 1)[-1]
        data = path.read_bytes()
        if name.endswith(".sgm"):
            lang = name.rsplit(".", 2)[-2]
            _write_gz(out / f"{name}.gz", data.decode("utf-8"))
            segs = sgm_segments(data.decode("utf-8"), name)
            atomic_write_text(out / f"newstest2014.{lang}", "\n".join(segs) + "\n")
        else:
            _write_bytes(out / name, data)


def _columns(text: str, source: str, names: tuple[str, ...], out: Path) -> None:
    """Split tab-separated lines into one line-aligned ``all.NAME.gz`` file per column."""
    cols: list[list[str]] = [[] for _ in names]
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < len(names):
            raise DataError(f"{source}:{n}: expected {len(names)} tab-separated columns, found {len(fields)}")
        for col, field in zip(cols, fields):
            col.append(field.strip())
    for name, col in zip(names, cols):
        _write_gz(out / f"all.{name}.gz", "\n".join(col) + "\n")


def _extract_tatoeba_cmn(files: dict[str, Path], out: Path) -> None:
    (path,) = files.values()
    _columns(path.read_bytes().decode("utf-8-sig"), path.name, ("en", "zh", "attribution"), out)


def _extract_tatoeba_fra(files: dict[str, Path], out: Path) -> None:
    (path,) = files.values()
    try:
        with zipfile.ZipFile(path) as z:
            text = z.read("fra-eng/fra.txt").decode("utf-8-sig")
            about = z.read("fra-eng/_about.txt")
    except (zipfile.BadZipFile, KeyError) as e:
        raise DataError(f"{path}: not the expected archive ({e})") from None
    _columns(text, "fra-eng/fra.txt", ("en", "fr"), out)
    _write_bytes(out / "original_about.txt", about)


def _extract_europarl(files: dict[str, Path], out: Path) -> None:
    (path,) = files.values()
    try:
        with tarfile.open(path) as tar:
            for lang in ("en", "it"):
                member = tar.extractfile(f"europarl-v7.it-en.{lang}")
                text = member.read().decode("utf-8")  # type: ignore[union-attr]
                _write_gz(out / f"all.{lang}.gz", text if text.endswith("\n") else text + "\n")
    except (tarfile.TarError, KeyError) as e:
        raise DataError(f"{path}: not the expected archive ({e})") from None


# -- line-aligned bitexts from archives, streamed ---------------------------------------------------
# The WMT'14 En-Fr training corpora are ~12M (selected) to ~40M (all) sentence pairs: every step
# below reads and writes them a block at a time, never a whole file in memory.

LANGS = ("en", "fr")


@dataclass(frozen=True)
class Bitext:
    """One line-aligned part of a corpus: ``STEM.en`` and ``STEM.fr`` (+ `suffix`) inside `archive`."""

    archive: str  # file name of the downloaded archive (the last component of its URL)
    stem: str  # member path without the language
    suffix: str = ""  # ".gz": each side is gzipped inside the archive

    def member(self, lang: str) -> str:
        return f"{self.stem}.{lang}{self.suffix}"


def _unpack(archive: Path, members: list[str], into: Path) -> dict[str, Path]:
    """Copy the named members of a tar archive, as stored, under `into`, reading the archive once
    front to back (a .tgz read out of order is decompressed again from its start)."""
    wanted, found = set(members), {}
    try:
        with tarfile.open(archive, mode="r|*") as tar:
            for info in tar:
                name = info.name.removeprefix("./")
                if name not in wanted or not info.isfile():
                    continue
                dest = into / name
                dest.parent.mkdir(parents=True, exist_ok=True)
                src = tar.extractfile(info)
                assert src is not None  # a regular file
                with src, open(dest, "wb") as f:
                    shutil.copyfileobj(src, f, CHUNK)
                found[name] = dest
    except (tarfile.TarError, OSError, EOFError) as e:
        raise DataError(f"{archive.name}: not the expected archive ({e})") from None
    missing = [m for m in members if m not in found]
    if missing:
        raise DataError(f"{archive.name}: not the expected archive (it has no {', '.join(missing)})")
    return found


def _append(path: Path, label: str, sink) -> int:
    """Decompress `path` (gzip when it ends in .gz) onto `sink` block by block; its line count.
    A last line without a newline gets one, so that the next part starts on a line of its own."""
    lines, last = 0, b"\n"
    try:
        with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as f:
            while block := f.read(CHUNK * 16):
                lines += block.count(b"\n")
                last = block[-1:]
                sink.write(block)
    except (OSError, EOFError) as e:
        raise DataError(f"{label}: cannot read ({e})") from None
    if last != b"\n":
        sink.write(b"\n")
        lines += 1
    return lines


def _append_pair(part: Bitext, members: dict[str, Path], en, fr) -> int:
    """Both sides of `part` onto the outputs `en` and `fr`; the number of pairs."""
    n_en, n_fr = (_append(members[part.member(lang)], f"{part.archive}: {part.member(lang)}", sink)
                  for lang, sink in zip(LANGS, (en, fr)))
    if n_en != n_fr:
        raise DataError(f"{part.archive}: {part.member('fr')}: {n_fr:,} lines, but {part.member('en')} has "
                        f"{n_en:,}; the two sides of a bitext must be line-aligned")
    log.info("%s: %s sentence pairs", part.stem, f"{n_en:,}")
    return n_en


@contextlib.contextmanager
def _sink(path: str, gz: bool) -> Iterator:
    """A binary output file: plain, or deterministic gzip (no name, no time stamp) at level 6,
    about three times faster than 9 on gigabytes of text for a few per cent more bytes."""
    with open(path, "wb") as raw:
        if not gz:
            yield raw
            return
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as f:
            yield f


def write_bitexts(parts: list[Bitext], archives: dict[str, Path], out: Path, name: str,
                  gz: bool = True) -> int:
    """Concatenate `parts`, in order, into ``out/NAME.en[.gz]`` and ``out/NAME.fr[.gz]``; returns
    the number of pairs. The two sides of every part must have the same number of lines, else a
    DataError names the part. One archive's members at a time are unpacked into a scratch folder
    of `out`; `archives` maps an archive's file name to the downloaded file."""
    ext = ".gz" if gz else ""
    total = 0

    def write(tmp_en: str, tmp_fr: str) -> None:
        nonlocal total
        with _sink(tmp_en, gz) as en, _sink(tmp_fr, gz) as fr:
            for archive, group in itertools.groupby(parts, key=lambda b: b.archive):
                group_parts = list(group)
                wanted = [b.member(lang) for b in group_parts for lang in LANGS]
                with tempfile.TemporaryDirectory(dir=out, prefix=".unpack.") as scratch:
                    members = _unpack(archives[archive], wanted, Path(scratch))
                    total += sum(_append_pair(b, members, en, fr) for b in group_parts)

    atomic_write(out / f"{name}.en{ext}",
                 lambda tmp_en: atomic_write(out / f"{name}.fr{ext}", lambda tmp_fr: write(tmp_en, tmp_fr)))
    return total


def _by_name(files: dict[str, Path]) -> dict[str, Path]:
    return {url.rsplit("/", 1)[-1]: path for url, path in files.items()}


def _extract_wmt14_selected(files: dict[str, Path], out: Path) -> None:
    """Schwenk's selection (the paper's corpus): train.{en,fr}.gz from bitexts.tgz, dev.{en,fr}
    (newstest2012+2013) and test.{en,fr} (newstest2014) from dev+test.tgz, all tokenised as
    distributed; beside them the untokenised newstest files of `wmt14-newstest`."""
    _extract_newstest({u: p for u, p in files.items() if u.startswith(_WMT)}, out)
    archives = _by_name(files)
    write_bitexts([Bitext("bitexts.tgz", f"bitexts.selected/{p}", ".gz") for p in _SCHWENK_PARTS],
                  archives, out, "train")
    write_bitexts([Bitext("dev+test.tgz", "dev/ntst1213")], archives, out, "dev", gz=False)
    write_bitexts([Bitext("dev+test.tgz", "dev/ntst14")], archives, out, "test", gz=False)


def _extract_wmt14_full(files: dict[str, Path], out: Path) -> None:
    """All of WMT'14's En-Fr training bitexts as statmt.org publishes them (untokenised), and dev
    = newstest2012+2013, test = newstest2014 from the pinned `wmt14-newstest` files."""
    _extract_newstest({u: p for u, p in files.items() if u.startswith(_WMT)}, out)
    write_bitexts(list(_FULL_PARTS), _by_name(files), out, "train")
    dev = {lang: read_lines(out / f"newstest2012.{lang}") + read_lines(out / f"newstest2013.{lang}")
           for lang in LANGS}
    check_aligned(*((f"newstest2012+2013.{lang}", dev[lang]) for lang in LANGS))
    for lang in LANGS:
        atomic_write_text(out / f"dev.{lang}", "\n".join(dev[lang]) + "\n")


# -- the catalogue ----------------------------------------------------------------------------------

_M30K = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
_M30K_FILES = {
    "test_2016_flickr.cs.gz": (22572, "200a4a74cc9560f051924abb9803be008d1908d77f747e9141aeb86dfd2797f1"),
    "test_2016_flickr.de.gz": (22890, "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8"),
    "test_2016_flickr.en.gz": (21077, "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9"),
    "test_2016_flickr.fr.gz": (22310, "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90"),
    "train.cs.gz": (593827, "a65adb8b32e3bc664f21ecba7a6e7f6950fd1f405e135f7c312faabdb6255077"),
    "train.de.gz": (637044, "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6"),
    "train.en.gz": (568929, "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f"),
    "train.fr.gz": (604242, "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c"),
    "val.cs.gz": (22096, "b63226e05c4bd5dd6a42897d74b86a1b9d2c31498252c572b1ea7f7996927fcc"),
    "val.de.gz": (24681, "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a"),
    "val.en.gz": (21650, "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28"),
    "val.fr.gz": (23001, "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9"),
}

_WMT = "https://raw.githubusercontent.com/Jun1770watanabe/Seq2seq/cafb682180a3bcfb364543852127fa55bdb37320/dev/"
_WMT_FILES = {
    "newstest2012.en": (381734, "f9e51f85c4948033fc7d77ef427f4d88908a8dd3f778970f62d0baafac3ff97e"),
    "newstest2012.fr": (440985, "29aa5aff172127f6adf5625cc2f8e44f579d524700e84f1ec0eb14f4f19719e4"),
    "newstest2013.en": (332974, "ace268a1d9724ca76f6d8e5c720ffdc08f01bdce45630ed8b269dc7918e1c16e"),
    "newstest2013.fr": (393465, "909b63be5df3eb8c13e1d5967bf3f0adfdb9f6ed5e638c5bffff563ee2ff7f41"),
    "newstest2014-fren-src.en.sgm": (441845,
                                     "5521ed9b1d07763c7e8d7ddfc0fda269cd114612a6283bd3836979ea4dd10a26"),
    "newstest2014-fren-ref.fr.sgm": (514587,
                                     "c57025c8a338c642fe3ad0206ddc75d258a5584e1d470b75f37af2fb666d7e93"),
}

_NAACL = "https://raw.githubusercontent.com/felicienveldema/NLP2/99005f9c2ab3798b239b8b34f12aa03a897288e6/Project1/"
_NAACL_FILES = {  # upstream path -> (local name, size, sha256)
    "testing/test/test.e": ("test.en", 36939,
                            "d73d6edcf34615f9f9489d0c234a44eadb3294635d10c9ceb77c22afca46bb39"),
    "testing/test/test.f": ("test.fr", 42709,
                            "7aece2a76346cd3e36a43d6e2958bf08bd22a24469e50c7e21da90fe49e0402d"),
    "testing/answers/test.wa.nonullalign": ("test.wa.nonullalign", 209027,
                                            "eedb9a219cb672a79130557fd4a4bc698565078c6a64abe8d9b18c3bb3ec0651"),
    "validation/dev.e": ("trial.en", 3470,
                         "56a871f16eafc2b44f9ba5942a636e2949baf288f228561f1889d821c04398d0"),
    "validation/dev.f": ("trial.fr", 3940,
                         "fb337c8e86297a538ebe533f9d283dc6e186961ab9ca032257bc1c1769f71b6e"),
    "validation/dev.wa.nonullalign": ("trial.wa.nonullalign", 17728,
                                      "1c04fe099aa83c1ef0fd1044547e34684618f2362e20da8dca3d94cb3b096f74"),
    "testing/test/README.test": ("original_README.test.txt", 1437,
                                 "c8c353600b2e41e892fce1539e2a226d19455f185ef46632b8b32043d118dc2c"),
    "training/README.training": ("original_README.training.txt", 1101,
                                 "7ad5e70f1c6756db45c5ec9311e8859278c4c3ecc4a5efeab75697590f4da7a9"),
}


# The paper's corpus (its footnote 4): WMT'14 En-Fr after the data selection of Cho et al. (2014),
# distributed by Holger Schwenk, tokenised. bitexts.tgz holds bitexts.selected/PART.{en,fr}.gz;
# dev+test.tgz holds dev/ntst1213.{en,fr} (newstest2012+2013, 6,003 pairs) and dev/ntst14.{en,fr}
# (newstest2014, 3,003). Neither archive's size or SHA-256 is published (PaddlePaddle's wmt14
# reader pins dev+test.tgz by MD5 only: 7d7897317ddd8ba0ae5c5fa7248d3ff5).
_SCHWENK = "http://www-lium.univ-lemans.fr/~schwenk/cslm_joint_paper/data/"
_SCHWENK_PARTS = (  # train.*.gz in this order, the order of the lab's own preparation scripts
    "ep7_pc45",  # Europarl v7, the selected 45%
    "nc9",  # News Commentary v9
    "dev08_11",  # newstest2008-2011
    "crawl",  # Common Crawl
    "ccb2_pc30",  # the 10^9-word Gigaword Fr-En corpus, selected 30%
    "un2000_pc34",  # UN 2000, selected 34%
)

# WMT'14's own En-Fr training bitexts (untokenised), as fairseq's prepare-wmt14en2fr.sh takes them.
_STATMT = "https://www.statmt.org/"
_FULL_ARCHIVES = {  # URL path -> size in bytes where known (giga-fren: TensorFlow's translate tutorial)
    "wmt13/training-parallel-europarl-v7.tgz": None,
    "wmt13/training-parallel-commoncrawl.tgz": None,
    "wmt13/training-parallel-un.tgz": None,
    "wmt14/training-parallel-nc-v9.tgz": None,
    "wmt10/training-giga-fren.tar": 2595102720,
}
_FULL_PARTS = (
    Bitext("training-parallel-europarl-v7.tgz", "training/europarl-v7.fr-en"),
    Bitext("training-parallel-commoncrawl.tgz", "commoncrawl.fr-en"),
    Bitext("training-parallel-un.tgz", "un/undoc.2000.fr-en"),
    Bitext("training-parallel-nc-v9.tgz", "training/news-commentary-v9.fr-en"),
    Bitext("training-giga-fren.tar", "giga-fren.release2.fixed", ".gz"),
)


_HANSARDS_COMMIT = "f25f54b680a40ffdee49bce03a428914e641f74d"
_HANSARDS = f"https://raw.githubusercontent.com/bkotzz/csc401/{_HANSARDS_COMMIT}/a2/data/Hansard/"


def _hansards_remotes() -> tuple[Remote, ...]:
    """The 944 files of the Hansards training corpus, pinned by hansards_csc401.sha256 beside this
    file (SHA-256, size, path under a2/data/Hansard/ without the "hansard.36." of every name)."""
    table = Path(__file__).with_name("hansards_csc401.sha256").read_text(encoding="utf-8")
    remotes = []
    for row in table.splitlines():
        if row.startswith("#") or not row.strip():
            continue
        digest, size, path = row.split()
        folder, name = path.split("/")
        remotes.append(Remote(f"{_HANSARDS}{folder}/hansard.36.{name}", digest, int(size)))
    return tuple(remotes)


def _extract_hansards(files: dict[str, Path], out: Path) -> None:
    """train.{en,fr}.gz from Training/, test.{en,fr}.gz from Testing/: each side's files joined in
    file-name order, a line's whitespace collapsed; each .e file must have its .f, line for line."""
    groups: dict[tuple[str, str], dict[str, Path]] = {}
    for url, path in files.items():
        folder, name = url.rsplit("/", 2)[-2:]
        stem, ext = name.rsplit(".", 1)
        groups.setdefault((folder, stem), {})[ext] = path
    for folder, split in (("Training", "train"), ("Testing", "test")):
        sides: dict[str, list[str]] = {"en": [], "fr": []}
        for (_, stem) in sorted(key for key in groups if key[0] == folder):
            pair = groups[folder, stem]
            if set(pair) != {"e", "f"}:
                raise DataError(f"{folder}/{stem}: needs an .e and an .f file, found {sorted(pair)}")
            lines = {}
            for lang, ext in (("en", "e"), ("fr", "f")):
                try:
                    text = pair[ext].read_bytes().decode("utf-8")
                except UnicodeDecodeError as e:
                    raise DataError(f"{folder}/{stem}.{ext}: not UTF-8 ({e})") from None
                lines[lang] = [" ".join(line.split()) for line in text.splitlines()]
            if len(lines["en"]) != len(lines["fr"]):
                raise DataError(f"{folder}/{stem}: {len(lines['en'])} English lines but {len(lines['fr'])} "
                                "French ones")
            for lang in sides:
                sides[lang] += lines[lang]
        for lang, kept in sides.items():
            _write_gz(out / f"{split}.{lang}.gz", "\n".join(kept) + "\n")


def _newstest_remotes() -> tuple[Remote, ...]:
    return tuple(Remote(_WMT + n, h, s) for n, (s, h) in _WMT_FILES.items())


def _catalogue() -> dict[str, Corpus]:
    corpora = [
        Corpus("multi30k", "multi30k", "Multi30k task 1 (WMT16), en/de/fr/cs, train/val/test_2016_flickr",
               tuple(Remote(_M30K + n, h, s) for n, (s, h) in _M30K_FILES.items()), _copy_as({})),
        Corpus("wmt14-newstest", "wmt14_en_fr_newstest",
               "WMT'14 En-Fr newstest2012/2013 (the paper's dev set) and newstest2014 (its test set)",
               _newstest_remotes(), _extract_newstest),
        Corpus("hansards-naacl2003", "hansards_naacl2003_align_gold",
               "HLT-NAACL 2003 English-French gold word alignments: 447 test + 37 trial sentences",
               tuple(Remote(_NAACL + p, h, s) for p, (_, s, h) in _NAACL_FILES.items()),
               _copy_as({p.rsplit("/", 1)[-1]: n for p, (n, _, _) in _NAACL_FILES.items()})),
        Corpus("hansards-csc401", "hansards_csc401_en_fr",
               "Canadian Hansards (36th Parliament) En-Fr, 310,661 train + 48,934 test pairs of at most 18 "
               "tokens, French unaccented: the training text for the NAACL-2003 alignment evaluation",
               _hansards_remotes(), _extract_hansards),
        Corpus("tatoeba-cmn-eng", "tatoeba_cmn_eng",
               "Tatoeba English-Chinese pairs (manythings.org cmn.txt, CC BY 2.0 FR, attribution kept)",
               (Remote("https://raw.githubusercontent.com/DaoChaShao/py-st-dl-translater-2.0/"
                       "bf77eed2d34d23aba8899aa7439f84e1626c0933/data/cmn.txt", None, 4151351),),
               _extract_tatoeba_cmn),
        Corpus("tatoeba-fra-eng", "tatoeba_fra_eng",
               "Tatoeba English-French pairs (manythings.org fra-eng.zip of 2019-04-07, CC BY 2.0 FR)",
               (Remote("https://raw.githubusercontent.com/modelexlab/data/"
                       "adddaf33ac35572bcfeb421efec29435e7ea9332/fra-eng.zip", None, 3424571),),
               _extract_tatoeba_fra),
        Corpus("europarl-it-en", "europarl_v7_it_en",
               "Europarl v7 Italian-English, the line pairs as published by statmt.org (all.it/all.en)",
               (Remote("https://www.statmt.org/europarl/v7/it-en.tgz"),), _extract_europarl),
        Corpus("wmt14-en-fr", "wmt14_en_fr",
               "WMT'14 En-Fr as the paper trained on it (Schwenk's selection, ~12M tokenised pairs: train), "
               "dev = newstest2012+2013, test = newstest2014; LIUM archives not pinned; ~5 GB of disk",
               (Remote(_SCHWENK + "bitexts.tgz"), Remote(_SCHWENK + "dev+test.tgz"), *_newstest_remotes()),
               _extract_wmt14_selected),
        Corpus("wmt14-en-fr-full", "wmt14_en_fr_full",
               "WMT'14 En-Fr, all training bitexts untokenised (Europarl, Common Crawl, UN, News Commentary, "
               "Giga-FrEn: ~40M pairs), dev = newstest2012+2013, test = newstest2014; not pinned; 25 GB disk",
               (*(Remote(_STATMT + path, None, size) for path, size in _FULL_ARCHIVES.items()),
                *_newstest_remotes()), _extract_wmt14_full),
    ]
    return {c.name: c for c in corpora}


CATALOGUE = _catalogue()
ALIASES = {"tatoeba": "tatoeba-cmn-eng", "europarl": "europarl-it-en", "wmt14": "wmt14-newstest",
           "newstest": "wmt14-newstest", "hansards": "hansards-naacl2003",
           "hansards-train": "hansards-csc401", "wmt14-en-fr-paper": "wmt14-en-fr"}


# -- downloading ------------------------------------------------------------------------------------

class DownloadError(DataError):
    """A download that failed or did not verify; the message says what to do."""


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def resolve_url(remote: Remote, mirror: str | None) -> str:
    if not mirror:
        return remote.url
    return mirror.rstrip("/") + "/" + remote.path


def _verify(remote: Remote, path: Path, url: str) -> None:
    size = path.stat().st_size
    if remote.size is not None and size != remote.size:
        bad = f"{url}: expected {remote.size:,} bytes, got {size:,}"
    elif remote.sha256 is not None and (digest := sha256_file(path)) != remote.sha256:
        bad = f"{url}: SHA-256 mismatch: expected {remote.sha256}, got {digest}"
    else:
        return
    path.unlink()
    raise DownloadError(f"{bad}; the downloaded bytes were removed. Run again to retry; if it fails again "
                        f"the upstream file has changed (or a --mirror serves other files) and cannot be "
                        f"trusted")


def fetch(remote: Remote, cache: Path, mirror: str | None = None, retries: int = 2,
          progress: bool = True, timeout: float = 60.0) -> Path:
    """The verified file for `remote` in `cache`, downloading (or resuming) it when needed."""
    from tqdm import tqdm

    url = resolve_url(remote, mirror)
    target = cache / "downloads" / urllib.parse.urlsplit(remote.url).netloc / remote.path
    if target.exists():
        if remote.sha256 is None or sha256_file(target) == remote.sha256:
            return target
        log.info("%s: cached copy fails its checksum; downloading again", target)
        target.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    for attempt in range(retries + 1):
        have = part.stat().st_size if part.exists() else 0
        request = urllib.request.Request(url, headers={"User-Agent": "rnnsearch"})
        if have:
            request.add_header("Range", f"bytes={have}-")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                if have and response.status != 206:  # the server ignored the range: start over
                    have = 0
                length = response.headers.get("Content-Length")
                total = have + int(length) if length is not None else remote.size
                with open(part, "ab" if have else "wb") as f, tqdm(
                        total=total, initial=have, unit="B", unit_scale=True, unit_divisor=1024,
                        desc=remote.path.rsplit("/", 1)[-1], disable=not progress, leave=False) as bar:
                    while block := response.read(CHUNK):
                        f.write(block)
                        bar.update(len(block))
            got = part.stat().st_size
            if total is not None and got < total:
                raise ConnectionError(f"connection closed after {got:,} of {total:,} bytes")
            break
        except urllib.error.HTTPError as e:
            if e.code == 416 and have:  # nothing left to fetch: the part file is already whole
                break
            raise DownloadError(f"{url}: HTTP {e.code} {e.reason}") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            got = part.stat().st_size if part.exists() else 0
            reason = getattr(e, "reason", e)
            if attempt == retries:
                raise DownloadError(f"{url}: download interrupted after {got:,} bytes ({reason}); "
                                    f"the partial file {part} is kept and the next run resumes it") from None
            log.info("%s: interrupted after %s bytes (%s); resuming", url, f"{got:,}", reason)
            time.sleep(min(2 ** attempt, 10) * 0.1)
    _verify(remote, part, url)
    os.replace(part, target)
    return target


def get(name: str, out_dir: str | Path = "data", cache: str | Path | None = None, mirror: str | None = None,
        allow_unpinned: bool = False, retries: int = 2, progress: bool = True,
        catalogue: dict[str, Corpus] | None = None) -> Path:
    """Download, verify and extract corpus `name` into ``out_dir/<folder>``; returns that folder."""
    catalogue = CATALOGUE if catalogue is None else catalogue
    name = ALIASES.get(name, name)
    if name not in catalogue:
        raise DataError(f"unknown corpus {name!r} (choose from {', '.join(sorted(catalogue))})")
    corpus = catalogue[name]
    unpinned = [r.url for r in corpus.files if r.sha256 is None]
    if unpinned and not allow_unpinned:
        raise DataError(f"{name}: no SHA-256 is pinned for {', '.join(unpinned)}, so its content cannot be "
                        f"verified; pass --allow-unpinned to download it anyway (its size is still checked "
                        f"where known, and the SHA-256 is printed for you to compare)")
    cache = Path(cache) if cache is not None else default_cache()
    mirror = mirror if mirror is not None else os.environ.get("RNNSEARCH_MIRROR")
    files = {}
    for remote in corpus.files:
        path = fetch(remote, cache, mirror, retries=retries, progress=progress)
        if remote.sha256 is None:
            log.info("%s: SHA-256 %s (not pinned)", remote.url, sha256_file(path))
        files[remote.url] = path
    out = Path(out_dir) / corpus.folder
    staging = Path(out_dir) / f".{corpus.folder}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        corpus.extract(files, staging)
        atomic_write_text(staging / "SOURCE.md", _source_note(corpus, mirror))
        if out.exists():
            shutil.rmtree(out)
        os.replace(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def fetch_hint(path: str | Path) -> str | None:
    """The command that writes `path`, when it lies in a catalogue corpus's folder
    (``data/multi30k/train.de.gz`` -> ``rnnsearch data get multi30k``); else None."""
    path = Path(path)
    for corpus in CATALOGUE.values():
        if path.parent.name == corpus.folder:
            where = path.parent.parent
            unpinned = " --allow-unpinned" if any(r.sha256 is None for r in corpus.files) else ""
            return (f"rnnsearch data get {corpus.name}" + ("" if where == Path("data") else f" --dir {where}")
                    + unpinned)
    return None


def split(files: list[str | Path], out_dir: str | Path, valid: int = 1000, test: int = 1000,
          seed: int = 1) -> dict[str, int]:
    """Split line-aligned files (source first) into train/valid/test, seeded.

    Lines are grouped by their source side, so a sentence that occurs several times (Tatoeba
    has many English sentences with two or more translations) lands in one split only and
    the test set is unseen. ``all.en.gz`` is written as ``train.en``, ``valid.en``, ``test.en``
    in `out_dir`. Returns the number of pairs per split.
    """
    import random

    if not files:
        raise DataError("data split: name the line-aligned files (source first)")
    paths = [Path(f) for f in files]
    columns = [read_lines(p) for p in paths]
    for p, col in zip(paths[1:], columns[1:]):
        if len(col) != len(columns[0]):
            raise DataError(f"{p}: {len(col):,} lines, but {paths[0]} has {len(columns[0]):,}; "
                            f"the files must be line-aligned")
    langs = [p.name.removesuffix(".gz").rsplit(".", 1)[-1] for p in paths]
    if len(set(langs)) != len(langs):
        raise DataError(f"data split: the files need distinct extensions (got {', '.join(langs)})")
    groups: dict[str, list[int]] = {}
    for i, line in enumerate(columns[0]):
        groups.setdefault(line.strip(), []).append(i)
    keys = list(groups)
    random.Random(seed).shuffle(keys)
    if valid + test >= len(keys):
        raise DataError(f"{paths[0]}: {len(keys):,} distinct source sentences, too few for "
                        f"--valid {valid} and --test {test} with anything left to train on")
    parts = {"test": keys[:test], "valid": keys[test:test + valid], "train": keys[test + valid:]}
    counts = {}
    for name, chosen in parts.items():
        rows = sorted(i for k in chosen for i in groups[k])
        counts[name] = len(rows)
        for lang, col in zip(langs, columns):
            atomic_write_text(Path(out_dir) / f"{name}.{lang}", "\n".join(col[i] for i in rows) + "\n")
    return counts


def _source_note(corpus: Corpus, mirror: str | None) -> str:
    lines = [f"# {corpus.name}", "", corpus.about, "", "Written by `rnnsearch data get`. Upstream files:", ""]
    for r in corpus.files:
        pin = f"SHA-256 `{r.sha256}`" if r.sha256 else "SHA-256 not pinned"
        size = f"{r.size:,} bytes, " if r.size else ""
        lines.append(f"- {r.url} ({size}{pin})")
    if mirror:
        lines += ["", f"Fetched through the mirror {mirror}."]
    return "\n".join(lines) + "\n"


def describe() -> str:
    rows = []
    for c in CATALOGUE.values():
        pinned = "SHA-256 pinned" if all(r.sha256 for r in c.files) else "not pinned (--allow-unpinned)"
        rows.append(f"{c.name:20s} -> {c.folder}/  {c.about}  [{len(c.files)} file(s), {pinned}]")
    return "\n".join(rows)


__all__ = ["CATALOGUE", "Bitext", "Corpus", "DownloadError", "Remote", "fetch", "get", "describe",
           "sgm_segments", "split", "write_bitexts"]
