"""Counts made in parts and folded into one: validate's chunks, migrate's files, each maybe in a worker.

Apart from ``kvlog.io.workers``: every run folds its parts, one file with one job too, and that one
need not import ``multiprocessing`` (a tenth of a small run's start-up).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Counted = TypeVar("Counted", bound="DataclassInstance")


def add_counts(total: Counted, part: Counted) -> None:
    """Add ``part``'s counts to ``total``: every int field summed, every dict field (a ``Counter`` too) key by key.

    Work is counted in parts (validate's chunks, migrate's files, each maybe in a worker) and folded
    in the parent: with one rule for every field, a count added to a report is folded with the rest,
    never forgotten. Fields of other types (a sample of lines) are the caller's to fold.
    """
    for field in dataclasses.fields(total):
        mine, theirs = getattr(total, field.name), getattr(part, field.name)
        if isinstance(mine, int):
            setattr(total, field.name, mine + theirs)
        elif isinstance(mine, dict):
            for key, count in theirs.items():
                mine[key] = mine.get(key, 0) + count
