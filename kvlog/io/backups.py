"""Telling the backups ``--in-place`` keeps from logs, whatever their suffix: a mark kvlog records on each.

A backup read as a log doubles every total (``summarize DIR/`` after ``--in-place DIR/``), and one taken
for an input is migrated in place (a rerun with another ``--backup-suffix`` rewrote the only copy of
the original). Neither its name (any suffix will do) nor its content (it is the original) tells, so
kvlog records what it wrote as it writes it:

- an extended attribute ``user.kvlog.backup`` on the backup's file, whose value is the backup's file
  name (names, ``/`` between them). The backup is a hard link of the log until the log's name takes
  the migrated file, so the mark is on the log's inode too for a while: only the name it holds is a
  backup, the log's own name never is;
- where the filesystem keeps no extended attributes, or this process may not set one, a hidden file
  ``.NAME.kvlog-backup`` beside the backup holding its device and inode (hidden: no run reads it).

A backup kept before kvlog marked them (up to 1fdc331) has no mark: ``NAME.orig`` (the default suffix)
beside ``NAME`` is taken for one.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Container
from pathlib import Path

from kvlog.io.errors import OutputError
from kvlog.io.outputs import Temporary, rename_temporary

MARK = "user.kvlog.backup"
#: the hidden file beside a backup that marks it where extended attributes cannot be set
MARKER_SUFFIX = ".kvlog-backup"
#: the suffix ``--in-place`` has always used by default: what tells a backup kept before the marks
DEFAULT_SUFFIX = ".orig"


def mark(descriptor: int, backup: Path) -> None:
    """Record that ``backup``, about to become a name of the file open as ``descriptor``, is a backup.

    Done before the name exists, so a run killed in between leaves no unmarked backup. Raises
    OutputError when it cannot be recorded at all: the log is then not replaced.
    """
    name = os.fsencode(backup.name)
    try:
        held = os.getxattr(descriptor, MARK).split(b"/")
    except OSError:
        held = []
    try:
        os.setxattr(descriptor, MARK, b"/".join([*(n for n in held if n and n != name), name]))
        return
    except OSError as exc:
        if exc.errno not in {errno.ENOTSUP, errno.EPERM, errno.EACCES, errno.ENOSPC, errno.E2BIG}:
            raise OutputError(f"{backup}: cannot mark the backup: {exc.strerror}") from None
    status = os.fstat(descriptor)
    marker = _marker(backup)
    staging = Temporary(marker)
    try:
        staging.handle.write(f"{status.st_dev} {status.st_ino}\n".encode())
        staging.complete()
        rename_temporary(staging.path, marker)
    except OSError as exc:
        staging.discard()
        raise OutputError(f"{marker}: cannot mark the backup: {exc.strerror or exc}") from None


def is_backup(path: Path, siblings: Container[str] | None = None) -> bool:
    """Whether ``path`` is a backup ``--in-place`` kept (marked, or ``NAME.orig`` beside ``NAME``).

    ``siblings``, the names in its directory where the caller listed it, spares a look for a marker
    file or a ``NAME`` that is not there.
    """
    name = path.name
    with contextlib.suppress(OSError):
        if os.fsencode(name) in os.getxattr(path, MARK, follow_symlinks=False).split(b"/"):
            return True
    marker = _marker(path)
    if siblings is None or marker.name in siblings:
        with contextlib.suppress(OSError, ValueError):
            device, inode = map(int, marker.read_text(encoding="ascii").split())
            status = path.lstat()
            if (status.st_dev, status.st_ino) == (device, inode):
                return True
    original = name.removesuffix(DEFAULT_SUFFIX)
    if original == name or not original:
        return False
    return original in siblings if siblings is not None else path.with_name(original).exists()


def _marker(backup: Path) -> Path:
    return backup.with_name(f".{backup.name}{MARKER_SUFFIX}")
