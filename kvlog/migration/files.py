"""Where ``kvlog migrate`` reads and writes: input expansion, compressed streams, atomic replacement.

An output file is never half-written: it is written to a temporary file in the same directory,
flushed to disk (fsync), and renamed over the target (``os.replace``), so a reader or a crash sees
either the old file or the complete new one. ``--in-place`` first keeps the original under a backup
name (a hard link where the filesystem allows, else a copy).
"""

from __future__ import annotations

import contextlib
import glob
import gzip
import os
import secrets
import shutil
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from kvlog.inputs import STDIN, InputError

TEMP_SUFFIX = ".kvlog-tmp"


def expand_inputs(names: tuple[str, ...], skip_suffixes: tuple[str, ...] = ()) -> list[str]:
    """Files as given, globs expanded, directories walked (sorted, hidden and temporary files skipped)."""
    out: list[str] = []
    for name in names:
        if name == STDIN:
            out.append(name)
            continue
        path = Path(name)
        if path.is_dir():
            found = sorted(
                p
                for p in path.rglob("*")
                if p.is_file()
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
                and not p.name.endswith((TEMP_SUFFIX, *skip_suffixes))
            )
            if not found:
                raise InputError(f"{name}: no files in this directory")
            out += [str(p) for p in found]
        elif not path.exists() and glob.has_magic(name):
            matches = sorted(glob.glob(name, recursive=True))  # noqa: PTH207 - the pattern may be absolute
            if not matches:
                raise InputError(f"{name}: no file matches this pattern")
            out += [m for m in matches if Path(m).is_file()]
        else:
            out.append(name)
    return out


@contextmanager
def compressed_writer(raw: IO[bytes], name: str) -> Iterator[IO[bytes]]:
    """Compress what is written to ``raw`` as ``name``'s suffix says (``.gz``, ``.zst``), else write as is."""
    if name.endswith(".gz"):
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as stream:
            yield stream  # type: ignore[misc]
    elif name.endswith(".zst"):
        try:
            import zstandard  # noqa: PLC0415 - an optional extra, imported only when a .zst file is written
        except ImportError:
            raise InputError(f"{name}: writing .zst needs the zstd extra: pip install 'kvlog[zstd]'") from None
        with zstandard.ZstdCompressor().stream_writer(raw, closefd=False) as stream:
            yield stream
    else:
        yield raw


@contextmanager
def atomic_output(target: Path, backup_suffix: str | None = None) -> Iterator[IO[bytes]]:
    """A stream whose content replaces ``target`` in one rename once the block completes, never before.

    A symbolic link is followed, so the file it names is replaced and the link survives. A target that
    exists but is not a regular file (``/dev/null``, a FIFO, a terminal) is written to directly:
    renaming over it would replace the device node itself with a regular file.
    """
    target = Path(os.path.realpath(target))
    if target.exists() and not target.is_file():
        with target.open("wb") as raw, compressed_writer(raw, target.name) as stream:
            yield stream
        return
    handle, temporary = _create_temporary(target)
    try:
        with compressed_writer(handle, target.name) as stream:
            yield stream
        handle.flush()
        os.fsync(handle.fileno())
        handle.close()
        if target.exists():
            _copy_owner_and_mode(target, temporary)
            if backup_suffix:
                _keep_backup(target, target.with_name(target.name + backup_suffix))
        temporary.replace(target)
        _sync_directory(target.parent)
    except BaseException:
        with contextlib.suppress(OSError):  # closing flushes again, and fails again on a full disk
            handle.close()
        temporary.unlink(missing_ok=True)
        raise


def _create_temporary(target: Path) -> tuple[IO[bytes], Path]:
    """A new file next to ``target``: never an existing name or link, and created with the usual mode (umask)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    while True:
        temporary = target.with_name(f".{target.name}.{secrets.token_hex(8)}{TEMP_SUFFIX}")
        try:
            descriptor = os.open(temporary, flags, 0o666)
        except FileExistsError:
            continue
        return os.fdopen(descriptor, "wb"), temporary


def _copy_owner_and_mode(source: Path, target: Path) -> None:
    """The replacement keeps the original's mode and, where this process may set it, its owner."""
    status = source.stat()
    with contextlib.suppress(PermissionError):
        os.chown(target, status.st_uid, status.st_gid)
    target.chmod(stat.S_IMODE(status.st_mode))


def _keep_backup(target: Path, backup: Path) -> None:
    staging = backup.with_name(f".{backup.name}{TEMP_SUFFIX}")
    staging.unlink(missing_ok=True)
    try:
        os.link(target, staging)
    except OSError:
        shutil.copy2(target, staging)
        _copy_owner_and_mode(target, staging)
    staging.replace(backup)


def _sync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):
        descriptor = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def same_file(a: str, b: Path) -> bool:
    """Whether input ``a`` and output ``b`` are the same file (so writing one would destroy the other)."""
    if a == STDIN or not b.exists():
        return False
    try:
        return Path(a).samefile(b)
    except OSError:
        return False


def stdout_binary() -> IO[bytes]:
    """Standard output, for bytes."""
    return sys.stdout.buffer
