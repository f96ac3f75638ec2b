"""A "no" carries an instance: the writer accepts it and the reader rejects it, both checked by a validator.

Where a rule cannot prove inclusion it searches the writer's candidate instances (and those just past
the reader's bounds) for one; none found leaves the question undecided, with the rule's reason.
"""

from __future__ import annotations

from typing import Any

from kvlog.check.drafts import validator
from kvlog.check.errors import SchemaError
from kvlog.check.inclusion.outcome import Found, Inclusion, Reason
from kvlog.check.instances import beyond, candidates, fragile


def accepts(schema: Any, value: Any) -> bool | None:
    """Whether a 2020-12 ``schema`` accepts ``value``; ``None`` when it cannot be compiled."""
    if fragile(schema, value):
        return None
    try:
        return bool(validator(schema, "2020-12").is_valid(value))
    except (SchemaError, ValueError, TypeError, OverflowError):
        return None


def search(writer: Any, reader: Any, path: str, message: str, around: Any = False) -> Inclusion:
    """Look for an instance of the writer the reader rejects: "no" with it, else undecided.

    ``around`` is a schema whose instances are likely to break (the writer meeting a reader's condition).
    """
    for value in candidates(writer) + candidates(around) + beyond(reader, writer):
        if accepts(writer, value) is True and accepts(reader, value) is False:
            return Inclusion(False, (Reason(path, message),), Found(value))
    return undecided(path, message)


def refute(path: str, writer: Any, message: str) -> Inclusion:
    """The reader accepts none of the writer's values here: "no" with any instance of the writer."""
    for value in candidates(writer):
        if accepts(writer, value) is True:
            return Inclusion(False, (Reason(path, message),), Found(value))
    return undecided(path, message + " (kvlog found no instance of it)")


def undecided(path: str, message: str) -> Inclusion:
    return Inclusion(None, (Reason(path, f"{message}: kvlog cannot prove it safe"),))


def unproven(outcome: Inclusion) -> Inclusion:
    """A break whose instance could not be built: undecided, each reason saying so."""
    return Inclusion(None, tuple(Reason(r.path, f"{r.message}: kvlog cannot prove it safe") for r in outcome.reasons))


def first(outcome: Inclusion) -> str:
    """The message of an outcome's first reason, for a rule that restates it at its own path."""
    return outcome.reasons[0].message if outcome.reasons else "the schemas differ"
