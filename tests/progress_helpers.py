"""What a progress display is told by a run (``kvlog.io.progress``): each increment of files and bytes, in order."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class Recorder:
    """A ``progress`` argument of ``commands.migrate``/``validate``/``summarize`` that keeps what it is told."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.steps: list[tuple[int, int]] = []

    @contextmanager
    def __call__(self, names: list[str]) -> Iterator[object]:
        self.names = list(names)
        yield lambda files, count: self.steps.append((files, count))

    @property
    def totals(self) -> tuple[int, int]:
        """The files and bytes done at the end of the run."""
        return sum(files for files, _ in self.steps), sum(count for _, count in self.steps)

    def reads_before_first_file(self) -> list[int]:
        """The bytes reported read before any file was done: a large file's progress while it is read."""
        reads = []
        for files, count in self.steps:
            if files:
                break
            reads.append(count)
        return reads


def sizes(paths: list[Path]) -> int:
    """The bytes on disk of the paths that exist (the totals a run's progress must reach)."""
    return sum(path.stat().st_size for path in paths if path.exists())
