"""Results derived from data files, kept across runs: what a run would compute again, the same each time.

Every ``kvlog migrate`` reads the same catalog and migration files: parsing their TOML and resolving
each schema's ``$ref``s (which imports ``referencing`` for it) took about a third of its start-up, for
a result that changes only when a file or kvlog's own code does. Such a result is kept here, keyed by a
digest of everything it depends on: the bytes of every input, the source of the code that derives it,
and the Python version. A changed input is a different key, so a stale result is never read; the work
is then done as before and the new result replaces the old one (one entry per kind of result: the
store never grows).

An entry is plain JSON, never a pickle: whoever can write the directory can make kvlog read a wrong
result, never run code; and a result is kept only when it reads back exactly as it was computed.
Entries are written to a temporary file and renamed over the old one, so a reader sees a whole entry
or none, and two runs writing at once leave one whole entry. A directory that cannot be created or
written, or an entry that cannot be read or parsed, only means the work is done: no error, no warning.

The directory is ``$KVLOG_CACHE_DIR``, else ``$XDG_CACHE_HOME/kvlog``, else ``~/.cache/kvlog``;
``KVLOG_CACHE_DIR=""`` (set but empty) keeps nothing.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

#: the variable naming the directory; set but empty: nothing is kept
ENV = "KVLOG_CACHE_DIR"
#: changes when the layout of an entry does
_FORMAT = b"kvlog-stored-1"


def directory() -> Path | None:
    """Where results are kept, or None when ``$KVLOG_CACHE_DIR`` is set but empty."""
    chosen = os.environ.get(ENV)
    if chosen is not None:
        return Path(chosen) if chosen else None
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path("~/.cache").expanduser()) / "kvlog"


def digest(parts: Iterable[bytes]) -> str:
    """A key naming ``parts`` in order (each one length-prefixed, so no two lists of parts share it)."""
    hasher = hashlib.sha256(_FORMAT)
    hasher.update(sys.version.encode())
    for part in parts:
        hasher.update(len(part).to_bytes(8, "little"))
        hasher.update(part)
    return hasher.hexdigest()


def sources(files: Iterable[str | os.PathLike[str]]) -> list[bytes]:
    """The bytes of each source file a result is derived by: a change to the code is a new key."""
    return [Path(file).read_bytes() for file in files]


def load(kind: str, key: str) -> Any:
    """The result kept under ``kind`` for ``key``; None when there is none (or it cannot be read)."""
    folder = directory()
    if folder is None:
        return None
    try:
        data = (folder / f"{kind}.json").read_bytes()
    except OSError:
        return None
    head = f"{key}\n".encode()
    if not data.startswith(head):
        return None  # another key's result (older files, another version of kvlog)
    try:
        return orjson.loads(memoryview(data)[len(head) :])
    except orjson.JSONDecodeError:
        return None


def store(kind: str, key: str, value: Any) -> None:
    """Keep ``value`` (JSON data) for ``key``, replacing the kind's earlier entry; silently not when it cannot."""
    folder = directory()
    if folder is None:
        return
    try:
        body = orjson.dumps(value)
    except TypeError:
        return  # not JSON data (a date, a huge integer): not kept
    if orjson.loads(body) != value:
        return  # does not read back as computed (a NaN, a date turned into text): not kept
    temporary = folder / f".{kind}.{os.getpid()}.tmp"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(f"{key}\n".encode() + body)
        temporary.replace(folder / f"{kind}.json")
    except OSError:
        temporary.unlink(missing_ok=True)
