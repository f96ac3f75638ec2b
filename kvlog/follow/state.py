"""``--state``: where each followed file was, so that a restarted follower neither loses nor repeats an event.

For each file: its device and inode, a digest of its first bytes (an inode number can be reused by a
file created after the old one was deleted), how many of its lines have all their events written
(``line``) and the offset those lines end at or before (``offset``, which tells a file truncated while
nobody followed it). For an output file: its size when the state was written. The state is written
atomically (a temporary file, fsync, rename) and only after the events it counts are written and
flushed, so at every instant the state on disk counts no event that is not in the output.

On restart the output file is cut back to the size the state records (what was written after the state
was saved is written again), and each file is read again from its start, its first ``line`` lines only
to rebuild the context (runs, arenas, dates) and the gauges, without writing their events again.

One follower at a time uses a state: two would each write the events and overwrite each other's marks.
The state file itself cannot carry the lock (each save replaces it), so a hidden file beside it does
(``lock_path``), held with ``flock`` for the follower's life and released by the kernel however it ends.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Any

import orjson

from kvlog.follow.errors import StateError
from kvlog.io.errors import OutputError
from kvlog.io.outputs import atomic_output
from kvlog.schema.readings import json_text

FORMAT = "kvlog-follow-state"
VERSION = 1


@dataclass(frozen=True)
class FileMark:
    """How far one followed file's events are written."""

    path: str
    device: int
    inode: int
    #: the lines whose events are all written
    line: int
    #: where those lines end, or an earlier line end: a file now shorter was truncated meanwhile
    offset: int
    #: the digest of the file's first ``head_bytes`` bytes
    head_sha256: str
    head_bytes: int
    #: no pattern named the file any more (renamed away, being read to its end): a restart reads it on
    #: wherever it is; a file at its old name that the patterns no longer name is left alone
    draining: bool = False

    def same_file(self, head: bytes) -> bool:
        """Whether ``head`` (at least ``head_bytes`` first bytes of a file with this inode) is this file's."""
        return len(head) >= self.head_bytes and digest(head[: self.head_bytes]) == self.head_sha256


@dataclass(frozen=True)
class FollowState:
    """Every followed file's mark, and the size of the output file the marks count events in."""

    files: tuple[FileMark, ...] = ()
    output: str | None = None
    output_size: int | None = None
    #: the output file's device and inode: a file put in its place meanwhile is not cut to ``output_size``
    output_device: int | None = None
    output_inode: int | None = None
    #: the marks name every file the follow had opened; false in the state a fresh run saves before its
    #: first pass (``--new-only`` on restart: a file with no mark was there at the start only if this is false)
    files_opened: bool = True


def digest(head: bytes) -> str:
    """The digest a mark keeps of a file's first bytes."""
    return hashlib.sha256(head).hexdigest()


def lock_path(path: Path) -> Path:
    """The file whose lock says a follower uses the state at ``path`` (never removed: removing races a taker)."""
    return path.with_name(f".{path.name}.lock")


@contextmanager
def locked(path: Path) -> Iterator[int]:
    """Hold the state at ``path`` for this follower (the lock file's descriptor); StateError if another one holds it."""
    lock = lock_path(path)
    try:
        descriptor = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as exc:
        raise StateError(f"{path}: cannot lock the state ({lock}): {exc.strerror}") from None
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StateError(f"{path}: another kvlog follow uses this state (it holds {lock})") from None
        except OSError as exc:
            raise StateError(f"{path}: cannot lock the state ({lock}): {exc.strerror}") from None
        yield descriptor
    finally:
        os.close(descriptor)


def load(path: Path) -> FollowState | None:
    """The state saved at ``path``; None when there is none yet."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(f"{path}: cannot read the state: {exc.strerror}") from None
    try:
        document = orjson.loads(data)
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise ValueError(f'not a kvlog follow state (no "format": "{FORMAT}")')
        if type(document.get("version")) is not int or document["version"] != VERSION:  # true == 1 in Python
            written = json_text(document["version"]) if "version" in document else "missing"
            raise ValueError(f"state version {written}; this kvlog reads version {VERSION}")
        return FollowState(
            files=tuple(_mark(entry) for entry in document["files"]),
            output=_optional(document, "output", str),
            output_size=_optional(document, "output_size", int),
            output_device=_optional(document, "output_device", int),
            output_inode=_optional(document, "output_inode", int),
            files_opened=_flag(document, "files_opened", default=True),
        )
    except (orjson.JSONDecodeError, ValueError, KeyError, TypeError) as exc:
        raise StateError(f"{path}: cannot use the state: {exc}; remove it to follow from the start") from None


def save(path: Path, state: FollowState) -> None:
    """Replace the state at ``path`` in one rename (never half-written)."""
    document = {
        "format": FORMAT,
        "version": VERSION,
        "output": state.output,
        "output_size": state.output_size,
        "output_device": state.output_device,
        "output_inode": state.output_inode,
        "files": [vars(mark) for mark in state.files],
        "files_opened": state.files_opened,
    }
    try:
        with atomic_output(path) as stream:
            stream.write(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
    except OutputError as exc:
        raise StateError(f"cannot save the state: {exc}") from None


def _mark(entry: Any) -> FileMark:
    if not isinstance(entry, dict):
        raise TypeError(f"a file entry is {type(entry).__name__}, not an object")
    optional = {name for name, spec in FileMark.__dataclass_fields__.items() if spec.default is not MISSING}
    missing = [name for name in FileMark.__dataclass_fields__ if name not in entry and name not in optional]
    if missing:
        raise ValueError(f"a file entry has no {', '.join(missing)}")
    mark = FileMark(**{name: entry[name] for name in FileMark.__dataclass_fields__ if name in entry})
    for name in ("device", "inode", "line", "offset", "head_bytes"):
        value = getattr(mark, name)
        if type(value) is not int or value < 0:
            raise ValueError(f"{mark.path}: {name} is {json_text(value)}, not a count")
    if not isinstance(mark.path, str) or not isinstance(mark.head_sha256, str):
        raise ValueError("a file entry's path and head_sha256 are strings")
    if type(mark.draining) is not bool:
        raise ValueError(f"{mark.path}: draining is {json_text(mark.draining)}, not true or false")
    return mark


def _flag(document: dict[str, Any], name: str, *, default: bool) -> bool:
    value = document.get(name, default)
    if type(value) is not bool:
        raise ValueError(f"{name} is {json_text(value)}, not true or false")
    return value


def _optional(document: dict[str, Any], name: str, kind: type) -> Any:
    value = document.get(name)
    if value is not None and type(value) is not kind:
        raise ValueError(f"{name} is {json_text(value)}, not {'a string' if kind is str else 'an integer'}")
    return value
