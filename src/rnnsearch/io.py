"""File helpers: atomic writes and strict reading of (possibly gzipped) text."""

from __future__ import annotations

import gzip
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

_UMASK = os.umask(0)
os.umask(_UMASK)


class DataError(ValueError):
    """Bad input a user can fix; the message names the file, the line and the problem."""


class MissingFileError(DataError):
    """An input file that is not there; `path` is the file asked for."""

    def __init__(self, path: Path, message: str | None = None):
        super().__init__(message or f"{path}: no such file")
        self.path = path


class EmptyFileError(DataError):
    """An input file with no bytes at all."""


def atomic_write(path: str | Path, write: Callable[[str], None]) -> None:
    """Call `write(tmp_path)`, then rename over `path`: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp creates 0600; give the file normal permissions
    try:
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)

    atomic_write(path, write)


def read_lines(path: str | Path) -> list[str]:
    """All lines of a UTF-8 text file (``.gz`` transparently), without line endings.

    Raises DataError for a missing or empty file and for invalid UTF-8 (with the
    1-based line number of the first bad line).
    """
    path = Path(path)
    if not path.exists():
        raise MissingFileError(path)
    if path.is_dir():
        raise DataError(f"{path}: is a directory, expected a text file")
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                data = f.read()
        else:
            data = path.read_bytes()
    except (OSError, EOFError) as e:
        raise DataError(f"{path}: cannot read ({e})") from None
    if not data:
        raise EmptyFileError(f"{path}: file is empty")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise DataError(f"{path}:{line}: invalid UTF-8 (byte 0x{data[e.start]:02x})") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def check_aligned(*named: tuple[str, list[str]]) -> None:
    """A DataError naming both files when line-aligned texts have different line counts."""
    (first, lines), *rest = named
    for name, other in rest:
        if len(other) != len(lines):
            raise DataError(f"{first} ({len(lines)} lines) and {name} ({len(other)} lines) "
                            "have different line counts")


def read_aligned(*paths: str | Path) -> list[list[str]]:
    """The lines of files that must correspond line by line (source and reference, ...)."""
    texts = [read_lines(p) for p in paths]
    check_aligned(*zip(map(str, paths), texts))
    return texts


def default_cache() -> Path:
    """Where rnnsearch keeps downloads and measured choices: $RNNSEARCH_CACHE, else ~/.cache/rnnsearch."""
    return Path(os.environ.get("RNNSEARCH_CACHE") or Path.home() / ".cache" / "rnnsearch")
