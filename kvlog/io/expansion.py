"""What the inputs of a command line are: the one expansion every command reads its inputs through.

migrate, validate, summarize, plot and follow, on every engine, take the same names: files, quoted
globs, directories (walked), ``-`` for standard input, and store URIs (``kvlog.io.store`` lists them).
One function expands them all, so that they agree on three things a user relies on:

- kvlog's own files met in a directory or through a pattern are not logs: the backups ``--in-place``
  keeps (``kvlog.io.backups``) and its temporaries are skipped, and the run says so once;
- a file is read once however often it is named (``logs/ 'logs/*.log'``, a link, ``./a.log``): inputs
  are told apart by what they are (device and inode; a store object by its canonical URI), not by
  the spelling, and the run says which names it read once;
- each input knows its path below the directory (or the pattern's fixed part) it was found under,
  which is where ``-o DIR/`` writes its output (``kvlog.migration.plan``), as ``cp -r`` does.
"""

from __future__ import annotations

import glob
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from kvlog.io import store
from kvlog.io.backups import is_backup
from kvlog.io.globs import is_pattern
from kvlog.io.inputs import STDIN
from kvlog.io.outputs import TEMP_SUFFIX
from kvlog.io.uris import is_uri
from kvlog.text.printable import printable_name

#: how many names a notice lists before ``...``
_SHOWN = 3


@dataclass(frozen=True)
class Input:
    """One file to read, and where its output goes below ``-o DIR/``."""

    name: str
    #: its path below the directory or the pattern's fixed part that found it; a file named alone: its name
    relative: str


@dataclass(frozen=True)
class Problem:
    """A name that could not be expanded, and why."""

    name: str
    reason: str

    def __str__(self) -> str:
        return f"{printable_name(self.name)}: {self.reason}"


@dataclass
class Expansion:
    """The files a command line names, each once, and what was left out (and why)."""

    inputs: list[Input] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    #: symbolic links met in a directory or through a pattern, left alone (a run that replaces files)
    skipped_links: list[str] = field(default_factory=list)
    #: kvlog's own files met in a directory or through a pattern: backups and temporaries, never read
    skipped_own: list[str] = field(default_factory=list)
    #: each name of a file named before, with the name it is read under
    repeated: list[tuple[str, str]] = field(default_factory=list)
    _seen: dict[object, str] = field(default_factory=dict, repr=False)

    @property
    def names(self) -> list[str]:
        """The inputs' names, in the order they are read."""
        return [one.name for one in self.inputs]

    def notices(self) -> list[str]:
        """What the run says once about the names: the files it skipped, the files named more than once."""
        said = []
        if self.skipped_own:
            said.append(
                f"skipped {len(self.skipped_own)} backup(s) and temporary file(s) kvlog wrote, not logs "
                f"(name one to read it): {_listed(self.skipped_own)}"
            )
        if self.repeated:
            shown = _listed([f"{again} (is {first})" for again, first in self.repeated])
            said.append(f"{len(self.repeated)} name(s) of a file named already, each file read once: {shown}")
        return said

    def _add(self, name: str, relative: str, key: object) -> None:
        if key in self._seen:
            self.repeated.append((name, self._seen[key]))
        else:
            self._seen[key] = name
            self.inputs.append(Input(name, relative))


def expand_inputs(
    names: tuple[str, ...], skip_suffixes: tuple[str, ...] = (), *, follow_links: bool = True
) -> Expansion:
    """Files as given, globs expanded, directories walked (sorted, hidden files skipped), each file once.

    A directory or pattern that cannot be read is a problem of its own, and the other names still
    count. Without ``follow_links`` (a run that replaces files), symbolic links met in a directory
    or through a pattern are skipped and listed: replacing through one would rewrite a file outside
    the tree and break its other hard links. A name ending in one of ``skip_suffixes`` (``--in-place``:
    its backup suffix) met that way is taken for a backup, as a marked one is.
    """
    found = Expansion()
    for name in names:
        if name == STDIN:
            found.inputs.append(Input(name, name))
            continue
        if is_uri(name):
            resolved = store.resolve(name, (TEMP_SUFFIX, *skip_suffixes))
            if not isinstance(resolved, str):
                root = name if name.endswith("/") else pattern_root(name)
                for uri in resolved[0]:
                    found._add(uri, _below(root, uri) if uri != name else _file_name(uri), store.identity(uri))
                found.problems += [Problem(uri, reason) for uri, reason in resolved[1]]
                continue
            name = resolved  # noqa: PLW2901 - file://: the path it names, expanded as paths are
        try:
            is_directory = stat.S_ISDIR(Path(name).stat().st_mode)
        except OSError:
            is_directory = False
        if is_directory:
            _walk(name, skip_suffixes, follow_links, found)
        elif is_pattern(name, os.path.exists):
            matches = sorted(glob.glob(name, recursive=True))  # noqa: PTH207 - the pattern may be absolute
            if not matches:
                found.problems.append(Problem(name, "no file matches this pattern"))
            root = pattern_root(name)
            for match in matches:
                if _own(Path(match), None, skip_suffixes):
                    found.skipped_own.append(match)
                else:
                    _add_entry(match, _below(root, match), follow_links, found)
        else:
            found._add(name, Path(name).name, file_identity(name, follow_links=follow_links))
    return found


def pattern_root(pattern: str) -> str:
    """The fixed part of a glob: its directories before the first with a wildcard (``.`` if none)."""
    parts = pattern.split("/")
    first = next((index for index, part in enumerate(parts) if glob.has_magic(part)), len(parts) - 1)
    return "/".join(parts[:first]) or ("/" if pattern.startswith("/") else ".")


def _walk(directory: str, skip_suffixes: tuple[str, ...], follow_links: bool, found: Expansion) -> None:
    before = len(found.inputs)

    def unreadable(error: OSError) -> None:
        found.problems.append(Problem(str(error.filename), f"cannot read the directory: {error.strerror}"))

    problems, skipped = len(found.problems), len(found.skipped_own)
    for root, directories, files in os.walk(directory, onerror=unreadable):
        directories[:] = sorted(d for d in directories if not d.startswith("."))
        siblings = set(files)
        for file in sorted(files):
            path = Path(root) / file
            if file.startswith("."):
                continue
            if _own(path, siblings, skip_suffixes):
                found.skipped_own.append(str(path))
                continue
            _add_entry(str(path), os.path.relpath(path, directory), follow_links, found)
    found.inputs[before:] = sorted(found.inputs[before:], key=lambda one: Path(one.name))
    if len(found.inputs) == before and len(found.problems) == problems and len(found.skipped_own) == skipped:
        found.problems.append(Problem(directory, "no files in this directory"))


def _own(path: Path, siblings: set[str] | None, skip_suffixes: tuple[str, ...]) -> bool:
    """Whether a file met in a directory or through a pattern is one kvlog wrote: a temporary or a backup."""
    return path.name.endswith((TEMP_SUFFIX, *skip_suffixes)) or is_backup(path, siblings)


def _add_entry(path: str, relative: str, follow_links: bool, found: Expansion) -> None:
    """A file met in a directory or through a pattern: a regular file counts, a link only when followed."""
    try:
        status = Path(path).stat(follow_symlinks=follow_links)
    except OSError as exc:
        found.problems.append(Problem(path, f"cannot open: {exc.strerror}"))
        return
    if stat.S_ISLNK(status.st_mode):
        found.skipped_links.append(path)
    elif stat.S_ISREG(status.st_mode):
        found._add(path, relative, (status.st_dev, status.st_ino))


def file_identity(name: str, *, follow_links: bool = True) -> object:
    """What a named file is: its device and inode (a link itself, without ``follow_links``); else its real path.

    Every command that must not write over one of its inputs, or write one file twice, compares these:
    a second name of a file (a hard link, a symbolic link, ``./a`` for ``a``) is the same file.
    """
    try:
        status = Path(name).stat(follow_symlinks=follow_links)
    except OSError:
        return os.path.realpath(name)
    return (status.st_dev, status.st_ino)


def _below(root: str, found: str) -> str:
    """``found``'s path below ``root``; its file name where it is not below it (a pattern with ``..``)."""
    if is_uri(found):
        relative = found[len(root) :].lstrip("/") if found.startswith(root) else ""
    else:
        relative = os.path.relpath(found, root)
    if relative in {"", "."} or relative.startswith(".."):
        return _file_name(found)
    return relative


def _file_name(name: str) -> str:
    return name.rstrip("/").rpartition("/")[2]


def _listed(names: list[str]) -> str:
    return ", ".join(names[:_SHOWN]) + (", ..." if len(names) > _SHOWN else "")
