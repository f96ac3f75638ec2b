"""Where ``kvlog migrate`` writes: atomic replacement, temporaries (what it reads: ``kvlog.io.expansion``).

An output file is never half-written: it is written to a temporary file in the same directory,
flushed to disk (fsync), and renamed over the target (``os.replace``), so a reader or a crash sees
either the old file or the complete new one. Every write error names the file it happened to: a
full disk under the dead letters is not the output's fault. (``--in-place`` has rules of its own:
``kvlog.io.inplace``.)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from kvlog.io import store
from kvlog.io.compression import compressed
from kvlog.io.errors import OutputError, ReaderGone
from kvlog.io.stopping import held_back, off_the_books, on_the_books, stop_if_swallowed
from kvlog.io.uris import is_uri
from kvlog.text.printable import printable_name

TEMP_SUFFIX = ".kvlog-tmp"
_STALE_NAME = re.compile(r"\.[0-9a-f]{16}" + re.escape(TEMP_SUFFIX))


class NamedSink:
    """A binary stream whose write errors name the file they happened to."""

    def __init__(self, stream: IO[bytes], name: str) -> None:
        self._stream = stream
        self.name = name

    def write(self, data: Any) -> int:
        try:
            return self._stream.write(data)
        except BrokenPipeError:  # its reader is gone (``| head``): the run stops, as SIGPIPE would stop it
            raise ReaderGone from None
        except OSError as exc:
            raise OutputError(f"{printable_name(str(self.name))}: cannot write: {exc.strerror or exc}") from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise ReaderGone from None
        except OSError as exc:
            raise OutputError(f"{printable_name(str(self.name))}: cannot write: {exc.strerror or exc}") from None


@contextmanager
def atomic_output(target: Path | str) -> Iterator[IO[bytes]]:
    """A stream whose content replaces ``target`` in one rename once the block completes, never before.

    A symbolic link is followed, so the file it names is replaced and the link survives. A target that
    exists but is not a regular file (``/dev/null``, a FIFO, a terminal) is written to directly:
    renaming over it would replace the device node itself with a regular file. A URI (a ``str``:
    ``s3://bucket/key``) is an object of a store, made only once complete (``kvlog.io.store``).
    """
    name = str(target)
    if isinstance(target, str) and is_uri(target):
        name = store.local_name(target)
        if name == target:
            with store.new_object(target) as raw, compressed(raw, target) as stream:
                yield stream
            return
    target = Path(name)
    target = Path(os.path.realpath(target))
    if target.exists() and not target.is_file():
        try:
            raw = target.open("wb")
        except OSError as exc:
            raise OutputError(f"{printable_name(str(name))}: cannot open: {exc.strerror}") from None
        try:
            with compressed(NamedSink(raw, name), target.name) as stream:  # type: ignore[arg-type]
                yield stream
        except BaseException:
            with suppress(OSError):  # the error that ended the block is the one to report
                raw.close()
            raise
        try:
            raw.close()  # the last buffered bytes are written here: /dev/full fails now, and is named
        except OSError as exc:
            raise OutputError(f"{printable_name(str(name))}: cannot write: {exc.strerror or exc}") from None
        return
    temporary = Temporary(target)
    try:
        with compressed(NamedSink(temporary.handle, name), target.name) as stream:  # type: ignore[arg-type]
            yield stream
        try:
            temporary.complete()
            if target.exists():
                copy_owner_and_mode(target.stat(), temporary.path)
            rename_temporary(temporary.path, target)
        except OSError as exc:
            raise OutputError(f"{printable_name(str(name))}: cannot write: {exc.strerror or exc}") from None
        sync_directory(target.parent)
    except BaseException:
        temporary.discard()
        raise


class Temporary:
    """A new hidden file beside a target, written in full before it takes the target's place.

    Every replacement goes through one (``atomic_output``, ``--in-place`` and the copy of its backup),
    so each gets the same guarantees: a name nothing had (never an existing file or link), the usual
    mode (umask), on the books from its creation (a stop signal removes it), locked while it lives
    (see ``remove_stale_temporaries``), on disk (fsync) before it is renamed, removed if it is not.
    """

    def __init__(self, target: Path) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        while True:
            path = target.with_name(f".{target.name}.{os.urandom(8).hex()}{TEMP_SUFFIX}")  # secrets: 5 ms to import
            with held_back():
                try:
                    descriptor = os.open(path, flags, 0o666)
                except FileExistsError:
                    continue
                except OSError as exc:
                    raise OutputError(
                        f"{printable_name(str(target))}: cannot create a file beside it: {exc.strerror}"
                    ) from None
                on_the_books(path)
            break
        fcntl.flock(descriptor, fcntl.LOCK_EX)  # held while it lives: see remove_stale_temporaries
        self.path = path
        self.handle = os.fdopen(descriptor, "wb")

    def complete(self) -> None:
        """Put what was written on disk (flush, fsync) and close the file; an OSError (a full disk) if that fails.

        A run whose stop signal was swallowed (``stop_if_swallowed``) stops here instead: nothing it wrote
        takes a target's place.
        """
        stop_if_swallowed()
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()

    def discard(self) -> None:
        """Close and remove the file: it will not take the target's place."""
        with contextlib.suppress(OSError):  # closing flushes again, and fails again on a full disk
            self.handle.close()
        remove_temporary(self.path)


def remove_stale_temporaries(*targets: Path) -> int:
    """Remove the temporaries a killed run (SIGKILL, a power cut) left beside ``targets``; return how many.

    A live run holds a lock on its temporary; one that can be locked has no writer left. Links are
    never followed, and a name replaced between the check and the removal is left alone. Each
    directory is listed once for all its targets: a run over a fleet's outputs sweeps them together
    (one listing a file would cost the square of the directory's size).
    """
    wanted: dict[Path, set[str]] = {}
    for target in targets:
        wanted.setdefault(target.parent, set()).add(target.name)
    removed = 0
    for directory, names in wanted.items():
        try:
            entries = [entry.name for entry in os.scandir(directory)]
        except OSError:
            continue  # no directory, no temporaries
        for name in entries:  # ".{target}.{16 hex digits}.kvlog-tmp": see atomic_output
            owner = name[1:].removesuffix(TEMP_SUFFIX).rpartition(".")[0]
            if name.startswith(".") and owner in names and _STALE_NAME.fullmatch(name[1 + len(owner) :]):
                removed += _remove_if_unlocked(directory / name)
    return removed


def _remove_if_unlocked(candidate: Path) -> int:
    """1 if ``candidate`` was a regular file no live run held locked and is now removed, else 0."""
    try:
        descriptor = os.open(candidate, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return 0
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        opened, named = os.fstat(descriptor), candidate.lstat()
        if (opened.st_dev, opened.st_ino) == (named.st_dev, named.st_ino) and stat.S_ISREG(named.st_mode):
            candidate.unlink()
            return 1
    except OSError:
        pass  # locked by a live run, or gone meanwhile
    finally:
        os.close(descriptor)
    return 0


def remove_temporary(temporary: Path) -> None:
    """Remove a temporary that will not be renamed into place."""
    temporary.unlink(missing_ok=True)
    off_the_books(temporary)


def rename_temporary(temporary: Path, target: Path) -> None:
    """Put a complete temporary in place of ``target``, in one rename."""
    temporary.replace(target)
    off_the_books(temporary)


def copy_owner_and_mode(status: os.stat_result, target: Path) -> None:
    """The replacement keeps the original's mode and, where this process may set it, its owner."""
    with contextlib.suppress(PermissionError):
        os.chown(target, status.st_uid, status.st_gid)
    target.chmod(stat.S_IMODE(status.st_mode))


def sync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable (best effort: some filesystems cannot sync a directory)."""
    with contextlib.suppress(OSError):
        descriptor = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def stdout_binary() -> IO[bytes]:
    """Standard output, for bytes."""
    return sys.stdout.buffer
