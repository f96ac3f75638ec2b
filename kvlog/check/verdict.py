"""``compare(old, new)``: is a schema change compatible, and if not, which old event proves it breaks.

A change is backward compatible when every instance the old schema accepts, the new one accepts too
(new readers read old events); forward is the reverse, full is both. The verdict is True, False or
None (undecided: kvlog could neither prove it safe nor find a breaking instance), never a guess. A
False verdict always comes with a counterexample that the old schema (as published, in its own
draft) accepts and the new one rejects, or the reverse for forward; a registry only says "no".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from kvlog.check.drafts import detect, infer, to_2020, validator
from kvlog.check.errors import SchemaError
from kvlog.check.inclusion import Found, Inclusion, Judge, Reason
from kvlog.check.instances import candidates, fragile
from kvlog.schema.walk import Draft

Mode = Literal["backward", "backward_transitive", "forward", "forward_transitive", "full", "full_transitive", "none"]
Direction = Literal["backward", "forward"]


@dataclass(frozen=True)
class Verdict:
    """The answer for one pair of schemas.

    ``compatible``: True, False, or None when undecided. ``reasons``: where (a JSON path into the
    instance) and why, one per difference found. ``counterexample``: when ``compatible`` is False, an
    instance (possibly JSON ``null``) that breaks, checked with both validators; ``direction`` says
    which way it breaks: ``backward`` (old accepts it, new rejects it) or ``forward`` (the reverse).
    """

    compatible: bool | None
    reasons: list[Reason] = field(default_factory=list)
    counterexample: Any = None
    direction: Direction | None = None


def compare(old: Any, new: Any, mode: Mode = "backward", draft: Draft | None = None) -> Verdict:
    """Whether changing ``old`` into ``new`` is compatible under ``mode``.

    Each schema is read in the draft its ``$schema`` names, so the two may be of different drafts;
    ``draft`` is the draft of a schema that names none. Without it, such a schema is read as 2020-12
    unless it uses only earlier drafts' keywords (``items: [...]``, ``additionalItems``,
    ``dependencies``, ``definitions``): then as draft-07, as schema registries read it. A schema that
    cannot be read gives an undecided verdict whose reason says why, never an exception.
    """
    if mode == "none":
        return Verdict(True)
    base = mode.removesuffix("_transitive")
    directions: list[Direction] = ["backward", "forward"] if base == "full" else [base]  # type: ignore[list-item]
    found = [(direction, _direction(old, new, direction, draft)) for direction in directions]
    broken = [(d, o) for d, o in found if o.holds is False]
    if broken:
        direction, first = broken[0]
        reasons = [reason for _, outcome in broken for reason in outcome.reasons]
        assert first.witness is not None
        return Verdict(False, reasons, first.witness.value, direction)
    reasons = [reason for _, outcome in found if outcome.holds is None for reason in outcome.reasons]
    return Verdict(None, reasons) if reasons else Verdict(True)


def _direction(old: Any, new: Any, direction: Direction, draft: Draft | None) -> Inclusion:
    drafts = (detect(old, draft), detect(new, draft)) if draft is not None else (infer(old), infer(new))
    if direction == "backward":
        return includes(old, new, drafts=drafts)
    return includes(new, old, drafts=(drafts[1], drafts[0]), labels=("new", "old"))


def includes(
    writer: Any,
    reader: Any,
    *,
    drafts: tuple[Draft, Draft] = ("2020-12", "2020-12"),
    labels: tuple[str, str] = ("old", "new"),
) -> Inclusion:
    """Whether every instance of ``writer`` is valid under ``reader``; a False outcome always has a checked witness.

    ``drafts`` are the drafts the writer and the reader are read in.
    """
    try:
        checks = [validator(schema, d) for schema, d in zip((writer, reader), drafts, strict=True)]
    except SchemaError as exc:
        return Inclusion(None, (Reason("$", f"a schema cannot be read: {exc}"),))
    try:
        translated = [to_2020(schema, d) for schema, d in zip((writer, reader), drafts, strict=True)]
    except SchemaError as exc:
        return Inclusion(None, (Reason("$", f"a schema cannot be read: {exc}"),))
    try:
        outcome = Judge(*labels).includes(translated[0], translated[1])
    except (RecursionError, ArithmeticError, ValueError, TypeError) as exc:  # keyword values no rule expects
        return Inclusion(None, (Reason("$", f"kvlog cannot compare these schemas ({type(exc).__name__}: {exc})"),))

    def breaks(value: Any) -> bool:
        if fragile(writer, value) or fragile(reader, value):
            return False
        return bool(checks[0].is_valid(value)) and not checks[1].is_valid(value)

    if outcome.holds is True or (
        outcome.holds is False and outcome.witness is not None and breaks(outcome.witness.value)
    ):
        return outcome
    for value in candidates(translated[0]):  # undecided, or a break whose instance did not hold: look again
        if breaks(value):
            reasons = outcome.reasons or (Reason("$", f"{labels[1]} rejects an instance {labels[0]} accepts"),)
            return Inclusion(False, reasons, Found(value))
    if outcome.holds is False:
        reasons = tuple(
            Reason(r.path, f"{r.message} (kvlog found no instance that proves it)") for r in outcome.reasons
        )
        return Inclusion(None, reasons)
    return outcome
