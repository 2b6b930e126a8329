"""Reading the user's files: the checks every format shares and the one error they all raise.

:class:`InputError` is a single line naming the file, the line and the field; every importer, rubric,
template and label reader raises it, so a bad file is always reported the same way and nothing is
written. Standard library only; the bottom layer (:mod:`judgekit.datasets` and
:mod:`judgekit.prompt_templates` both build on it).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["MAX_FILE_BYTES", "InputError", "read_bytes", "read_text"]

MAX_FILE_BYTES = 512 * 1024 * 1024


class InputError(ValueError):
    """A user file or argument is invalid; ``str()`` is the one line to show."""

    def __init__(self, path: str | Path, message: str, *, line: int | None = None, field: str | None = None):
        self.path, self.line, self.field, self.reason = str(path), line, field, message
        where = self.path + (f":{line}" if line is not None else "")
        what = f" field '{field}':" if field else ""
        super().__init__(f"{where}:{what} {message}")


def read_bytes(path: str | Path) -> bytes:
    """A file's bytes after the checks every format shares (exists, size, UTF-16, NUL, empty); a UTF-8
    BOM is removed."""
    p = Path(path)
    if not p.is_file():
        raise InputError(p, "no such file")
    size = p.stat().st_size
    if size > MAX_FILE_BYTES:
        raise InputError(p, f"file is {size} bytes; the limit is {MAX_FILE_BYTES}")
    raw = p.read_bytes()
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise InputError(p, "the file is UTF-16; save it as UTF-8", line=1)
    raw = raw.removeprefix(b"\xef\xbb\xbf")
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise InputError(p, "contains a NUL byte (binary file?)", line=raw[:nul].count(b"\n") + 1)
    if not raw.strip():
        raise InputError(p, "the file is empty")
    return raw


def read_text(path: str | Path) -> str:
    """Read a file as UTF-8 (a BOM is allowed); invalid bytes are reported with their line."""
    p = Path(path)
    raw = read_bytes(p)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise InputError(
            p, f"not valid UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start})", line=line
        ) from None
