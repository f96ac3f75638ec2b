"""The answer to one inclusion question, and how the answers to its parts combine into it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Reason:
    """Where (a JSON path into the instance) and why the two schemas differ there."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True)
class Found:
    """An instance (which may be JSON ``null``), boxed so that "none found" is not confused with it."""

    value: Any


@dataclass(frozen=True)
class Inclusion:
    """``holds``: True (included), False (an instance breaks; ``witness`` when one was built), None (undecided)."""

    holds: bool | None
    reasons: tuple[Reason, ...] = ()
    witness: Found | None = None


YES = Inclusion(True)


def conjoin(outcomes: Iterable[Inclusion]) -> Inclusion:
    """Every obligation must hold: the first break wins, else any undecided one, else yes."""
    listed = list(outcomes)
    broken = [o for o in listed if o.holds is False]
    if broken:
        witness = next((o.witness for o in broken if o.witness is not None), None)
        first_per_path = {reason.path: reason for reason in reversed(_reasons(broken))}
        return Inclusion(False, tuple(reversed(first_per_path.values())), witness)
    undecided = [o for o in listed if o.holds is None]
    return Inclusion(None, _reasons(undecided)) if undecided else YES


def _reasons(outcomes: list[Inclusion]) -> tuple[Reason, ...]:
    return tuple(dict.fromkeys(reason for o in outcomes for reason in o.reasons))
