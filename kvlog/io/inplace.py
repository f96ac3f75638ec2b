"""``--in-place``: replace a log with its migration without ever losing a line of it or its backup.

A log given to ``--in-place`` is often the operator's only copy, and the job is rerun (nightly, on
retry, twice at once). The rules, each closing a way the original was once lost:

- The file is opened first, without following a symbolic link, and everything afterwards works from
  that descriptor: the migration reads it, the backup is a hard link to it (``linkat`` through
  ``/proc/self/fd``), and before the rename the path must still name it. A link swapped in mid-run
  can neither feed another file's content into the log's directory nor be replaced.
- Runs on one file take turns (``flock`` on it); the second then finds the result of the first.
- A backup is never overwritten. An existing backup that is not this very file stops the
  replacement, unless the migration changes nothing: a file that is already current is left alone.
- A backup is never an input: each is marked as it is made (``kvlog.io.backups``), and a marked one
  (whatever its suffix) is refused, named or met in a directory.
- A file that changed while it was migrated (a server still appending) is left untouched: the
  lines written after it was read would otherwise exist only in the backup.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from kvlog.io import backups
from kvlog.io.errors import InputError, OutputError, ReplaceRefused
from kvlog.io.inputs import open_raw
from kvlog.io.outputs import (
    Temporary,
    copy_owner_and_mode,
    remove_stale_temporaries,
    remove_temporary,
    rename_temporary,
    sync_directory,
)
from kvlog.text.printable import printable_name

#: how often a run reopens a file that was replaced while it waited for the lock before giving up
_REOPEN_ATTEMPTS = 100


@dataclass(frozen=True)
class _Seen:
    """What identifies the content that was read: the inode, and its size and modification time."""

    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, status: os.stat_result) -> _Seen:
        return cls(status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)


class InPlace:
    """One input being replaced: its open descriptor (locked), the temporary beside it, the backup name."""

    def __init__(self, name: str, backup_suffix: str) -> None:
        self.name = name
        self.path = Path(name)
        self.backup = self.path.with_name(self.path.name + backup_suffix)
        self.source = _open_locked(name)
        if backups.is_backup(self.path):
            self.source.close()
            raise ReplaceRefused(
                "{file}: not replaced: it is a backup {in_place} kept, and a backup is never rewritten "
                "(it may be the only copy of the original); migrate a copy of it with {output}",
                file=name,
            )
        self.seen = _Seen.of(os.fstat(self.source.fileno()))
        self._temporary: Path | None = None
        #: hidden temporaries a killed run left beside the log (its output, its backup's copy), removed now
        #: that this run holds the lock
        self.stale_removed = remove_stale_temporaries(self.path, self.backup)

    def close(self) -> None:
        """Release the lock (by closing the descriptor)."""
        self.source.close()

    @contextmanager
    def output(self) -> Iterator[IO[bytes]]:
        """Where the migration is written: a new hidden file beside the log, removed unless it replaces it.

        When a foreign backup is already there, the result could only be used if it changes nothing:
        it is counted, not stored.
        """
        if self._foreign_backup():
            with Path(os.devnull).open("wb") as sink:
                yield sink
            return
        temporary = Temporary(self.path)
        self._temporary = temporary.path
        try:
            yield temporary.handle
            temporary.complete()
        except BaseException:
            temporary.discard()
            raise

    def discard(self) -> None:
        """Remove the temporary (the run failed or the file stays as it is)."""
        if self._temporary is not None:
            remove_temporary(self._temporary)
            self._temporary = None

    def replace(self, changed: bool) -> str:
        """Put the migrated file in place of the log, keeping a backup; say what was done.

        Raises ReplaceRefused (the log untouched, the temporary removed) when that cannot be done safely.
        """
        try:
            if not changed:
                return "already current, unchanged"  # (a killed run's leftovers are removed all the same)
            if self._temporary is None:
                raise self._backup_in_the_way()
            self._check_unchanged()
            self._keep_backup()
            copy_owner_and_mode(os.fstat(self.source.fileno()), self._temporary)
            self._check_unchanged()
            try:
                rename_temporary(self._temporary, self.path)
            except OSError as exc:
                raise OutputError(
                    f"{printable_name(str(self.name))}: cannot replace it: {exc.strerror or exc}"
                ) from None
            self._temporary = None
            sync_directory(self.path.parent)
        finally:
            self.discard()
        after = os.fstat(self.source.fileno())
        if after.st_size != self.seen.size:
            raise ReplaceRefused(
                "{file}: {count} bytes were written to it while it was being replaced; they are in the backup "
                "{backup}, not in {file}",
                file=self.name,
                count=after.st_size - self.seen.size,
                backup=self.backup,
            )
        stale = f"; removed {self.stale_removed} temporary file(s) a killed run left" if self.stale_removed else ""
        return f"replaced, original kept as {self.backup}{stale}"

    def _foreign_backup(self) -> bool:
        """Whether the backup name is taken by anything but this very file."""
        return self._backup_status() == "foreign"

    def _backup_status(self) -> str:
        """``absent``; ``ours``, a link to this very file (left by a run killed before its rename); or ``foreign``."""
        try:
            status = self.backup.lstat()
        except FileNotFoundError:
            return "absent"
        except OSError as exc:
            raise OutputError(f"{self.backup}: cannot check the backup: {exc.strerror}") from None
        return "ours" if (status.st_dev, status.st_ino) == (self.seen.device, self.seen.inode) else "foreign"

    def _backup_in_the_way(self) -> ReplaceRefused:
        return ReplaceRefused(
            "{file}: not replaced: the backup {backup} already exists and is not this file (it may be the only "
            "copy of the original); move it away, or name a new backup with {backup_suffix}",
            file=self.name,
            backup=self.backup,
        )

    def _check_unchanged(self) -> None:
        """The path still names the file read, and nothing was written to it since it was opened."""
        now = _Seen.of(os.fstat(self.source.fileno()))
        if now != self.seen:
            raise ReplaceRefused(
                "{file}: changed while migrating (it was written to); left untouched. "
                "Migrate a log once its server has closed it (rotated), or use {output}",
                file=self.name,
            )
        try:
            named = self.path.lstat()
        except OSError as exc:
            raise ReplaceRefused(
                "{file}: changed while migrating ({reason}); left untouched", file=self.name, reason=exc.strerror
            ) from None
        if (named.st_dev, named.st_ino) != (self.seen.device, self.seen.inode):
            raise ReplaceRefused(
                "{file}: changed while migrating (the name now points to another file); left untouched", file=self.name
            )

    def _keep_backup(self) -> None:
        """A hard link to the very file read; a copy of it where the filesystem has no hard links.

        Created with ``link``, which never replaces an existing name: a backup that appeared meanwhile
        stops the replacement instead of being overwritten.
        """
        status = self._backup_status()
        if status == "ours":
            return
        if status == "foreign":
            raise self._backup_in_the_way()
        backups.mark(self.source.fileno(), self.backup)
        try:
            _link_descriptor(self.source.fileno(), self.backup)
            return
        except FileExistsError:
            raise self._backup_in_the_way() from None
        except OSError:
            pass  # no /proc, or no hard links on this filesystem: copy
        staging = Temporary(self.backup)
        try:
            self.source.seek(0)
            shutil.copyfileobj(self.source, staging.handle, 1 << 20)
            staging.complete()
            copy_owner_and_mode(os.fstat(self.source.fileno()), staging.path)
            with staging.path.open("rb") as copy:
                backups.mark(copy.fileno(), self.backup)
            os.link(staging.path, self.backup)
        except FileExistsError:
            raise self._backup_in_the_way() from None
        except OSError as exc:
            raise OutputError(f"{self.backup}: cannot keep the backup: {exc.strerror or exc}") from None
        finally:
            staging.discard()


def _link_descriptor(descriptor: int, name: Path) -> None:
    """A new name for the open file ``descriptor``: ``linkat(AT_SYMLINK_FOLLOW)`` through ``/proc/self/fd``.

    ``os.link`` calls plain ``link()``, which links the /proc symlink itself (EXDEV), unless a
    directory descriptor is given: only then does it call ``linkat`` with the follow flag.
    """
    directory = os.open(name.parent, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        os.link(f"/proc/self/fd/{descriptor}", name, src_dir_fd=directory, follow_symlinks=True)
    finally:
        os.close(directory)


def _open_locked(name: str) -> IO[bytes]:
    """``name`` opened without following links and locked; reopened if a run before replaced it meanwhile."""
    for _ in range(_REOPEN_ATTEMPTS):
        source = open_raw(name, follow_symlinks=False)
        try:
            fcntl.flock(source.fileno(), fcntl.LOCK_EX)
            opened = os.fstat(source.fileno())
            try:
                named = os.lstat(name)
            except OSError as exc:
                raise InputError(f"{printable_name(str(name))}: cannot open: {exc.strerror}") from None
            if (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino) and stat.S_ISREG(named.st_mode):
                return source
        except BaseException:
            source.close()
            raise
        source.close()  # replaced while this run waited: read what is there now
    raise InputError(f"{printable_name(str(name))}: keeps being replaced; not migrated")
