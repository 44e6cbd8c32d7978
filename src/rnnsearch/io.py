"""File helpers: atomic writes and strict reading of (possibly gzipped) text."""

from __future__ import annotations

import gzip
import io
import os
import tempfile
from collections.abc import Callable, Iterator
from itertools import islice
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


_BOM = "\ufeff".encode()


def iter_line_blocks(path: str | Path, size: int) -> Iterator[list[bytes]]:
    """The raw lines of a text file (``.gz`` transparently), `size` at a time, for reading a
    corpus in bounded memory; decode each block with `decode_block`.

    The rules are read_lines': missing, directory, unreadable and empty files raise the same
    errors, a BOM at the start is dropped. Lines keep their b"\\n" (workers join a block
    into one bytes object to decode it). Invalid UTF-8 is left to `decode_block`, so a block
    can be decoded in another process.
    """
    path = Path(path)
    with _open_for_lines(path) as f:
        first = True
        while True:
            try:
                block = list(islice(f, size))
            except (OSError, EOFError) as e:
                raise DataError(f"{path}: cannot read ({e})") from None
            if first and block and block[0].startswith(_BOM):
                block[0] = block[0][len(_BOM):]
                if not block[0]:  # the file is only a BOM: read_lines finds no line in it
                    block.pop(0)
            first = False
            if not block:
                return
            yield block


def _open_for_lines(path: Path) -> gzip.GzipFile | io.BufferedReader:
    if not path.exists():
        raise MissingFileError(path)
    if path.is_dir():
        raise DataError(f"{path}: is a directory, expected a text file")
    try:
        f = gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e})") from None
    try:
        empty = not f.peek(1)
    except (OSError, EOFError) as e:
        f.close()
        raise DataError(f"{path}: cannot read ({e})") from None
    if empty:
        f.close()
        raise EmptyFileError(f"{path}: file is empty")
    return f


def decode_block(block: bytes, path: str | Path, first_line: int) -> list[str]:
    """The lines of `block` (raw lines joined, line `first_line` of `path` first) as read_lines
    returns them: decoded, without "\\n" or a "\\r" before it; invalid UTF-8 raises
    read_lines' DataError with the line number in the whole file."""
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError as e:
        line = first_line + block.count(b"\n", 0, e.start)
        raise DataError(f"{path}:{line}: invalid UTF-8 (byte 0x{block[e.start]:02x})") from None
    lines = text.split("\n")
    if text.endswith("\n") or not text:
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def count_lines(path: str | Path, size: int = 65_536) -> int:
    """The number of lines read_lines would return, in bounded memory; raises the error it would
    raise first (a read error anywhere comes before invalid UTF-8, as read_lines reads all first)."""
    n, bad = 0, None
    for block in iter_line_blocks(path, size):
        if bad is None:
            try:
                decode_block(b"".join(block), path, n + 1)
            except DataError as e:
                bad = e
        n += len(block)
    if bad is not None:
        raise bad
    return n


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
