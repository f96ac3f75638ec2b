"""Reading catalog files that a pull request may have planted.

Git stores symbolic links, so a pull request can put a link to ``/dev/zero``, to a FIFO or to a
secret outside the repository where a schema, a migration or a golden log is expected. Every file
``kvlog check`` reads goes through here: only a regular file, inside the project (after resolving
links), under a size cap, is read; anything else is a ``Refused`` that the caller turns into a
finding on that file. Directories are walked without following links.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from kvlog.check.errors import Refused
from kvlog.io.compression import decompressed

#: Schemas, migrations, expectation files and pyproject.toml: far more than any real one needs.
DOCUMENT_BYTES = 8 << 20
#: A golden log, before and after decompression.
LOG_BYTES = 256 << 20
#: JSON nesting a catalog document may have: kvlog's own schemas use 7, the rules recurse per level.
MAX_DEPTH = 64

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def entries(directory: Path, wanted: Callable[[str], bool]) -> list[Path]:
    """Every entry under ``directory`` whose name ``wanted`` accepts, sorted, without following links.

    Directories and links are listed too when their name matches (``v2.json/``, ``a.log -> /dev/zero``),
    and so is every link to a directory: reading them is refused with a reason, instead of their
    being skipped in silence or, by a reader that follows links, read from outside the project.
    """
    found: list[Path] = []
    for top, directories, names in os.walk(directory, followlinks=False):
        linked = [name for name in directories if Path(top, name).is_symlink()]
        found += [Path(top, name) for name in [*directories, *names] if wanted(name) or name in linked]
    return sorted(found)


def read_file(path: Path, root: Path, cap: int = DOCUMENT_BYTES) -> bytes:
    """The content of ``path``, a regular file inside ``root`` of at most ``cap`` bytes; else ``Refused``."""
    with _open_regular(path, root, cap) as stream:
        data = stream.read(cap + 1)
    if len(data) > cap:
        raise Refused(f"over the {_size(cap)} limit for a catalog file")
    return data


@contextmanager
def open_log(path: Path, root: Path, cap: int = LOG_BYTES) -> Iterator[IO[bytes]]:
    """``path`` (a golden log) opened like ``read_file`` checks it, decompressed, failing past ``cap`` bytes."""
    with _open_regular(path, root, cap) as raw, decompressed(raw, path.name) as stream:
        yield _Capped(stream, cap)  # type: ignore[misc]


def _open_regular(path: Path, root: Path, cap: int) -> IO[bytes]:
    if not inside(path, root):  # a link, or a link in the path, leading elsewhere
        raise Refused(f"a symbolic link to {os.path.realpath(path)}, outside the project")
    try:
        status = path.stat()
    except OSError as exc:
        raise Refused(f"cannot read: {exc.strerror}") from None
    _require_regular(status.st_mode, status.st_size, cap)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise Refused(f"cannot read: {exc.strerror}") from None
    status = os.fstat(descriptor)  # what was opened, in case the path was swapped after the stat
    try:
        _require_regular(status.st_mode, status.st_size, cap)
    except Refused:
        os.close(descriptor)
        raise
    os.set_blocking(descriptor, True)
    return os.fdopen(descriptor, "rb")


def _require_regular(mode: int, size: int, cap: int) -> None:
    for test, kind in _KINDS:
        if test(mode):
            raise Refused(f"not a regular file ({kind})")
    if not stat.S_ISREG(mode):
        raise Refused("not a regular file")
    if size > cap:
        raise Refused(f"{_size(size)}, over the {_size(cap)} limit for a catalog file")


def inside(path: Path, root: Path) -> bool:
    """Whether ``path`` lies within ``root``, both with their links resolved."""
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root))


def _size(size: int) -> str:
    return f"{size >> 20} MiB" if size and size % (1 << 20) == 0 else f"{size} bytes"


def refuse_blob(mode: str, size: int, cap: int = DOCUMENT_BYTES) -> str | None:
    """Why a file stored in git (``git ls-tree`` mode and size) is not read, or None when it may be."""
    if mode == "120000":
        return "a symbolic link (in git); catalog files are regular files"
    if size > cap:
        return f"{_size(size)}, over the {_size(cap)} limit for a catalog file"
    return None


def depth(document: object) -> int:
    """How deeply ``document`` (parsed JSON or TOML) nests, counted without recursion."""
    deepest, stack = 0, [(document, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict | list):
            deepest = max(deepest, level)
            children = value.values() if isinstance(value, dict) else value
            stack += [(child, level + 1) for child in children]
    return deepest


class _Capped(io.RawIOBase):
    """A decompressed log that fails once it has given more than ``cap`` bytes: a bomb stops there."""

    def __init__(self, stream: IO[bytes], cap: int) -> None:
        super().__init__()
        self.stream, self.cap, self.left = stream, cap, cap

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1, /) -> bytes:
        data = self.stream.read(self.left + 1 if size < 0 else min(size, self.left + 1))
        self.left -= len(data)
        if self.left < 0:
            raise OSError(f"decompresses to more than {_size(self.cap)}, the limit for a golden log")
        return data
