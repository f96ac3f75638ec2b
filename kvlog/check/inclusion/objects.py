"""The rules of the object keywords, one per group of keywords.

The groups: each named member, the members no property names, ``propertyNames``, member counts
and ``dependentRequired``.

``objects`` is the type's rule: it conjoins ``RULES``, one per group of keywords, each
``rule(judge, writer, reader, path, named)`` with the member names either side names.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kvlog.check import regular
from kvlog.check.inclusion.algebra import merge
from kvlog.check.inclusion.bounds import show_range
from kvlog.check.inclusion.members import closed, embed, forced, fresh_name, lift_member, member_schema, unnamed
from kvlog.check.inclusion.outcome import YES, Inclusion, Reason, conjoin
from kvlog.check.inclusion.witnesses import first, refute, search
from kvlog.check.instances import same
from kvlog.check.jsondiff import show

if TYPE_CHECKING:
    from kvlog.check.inclusion.judge import Judge

Names = list[str]  # the member names either schema names, sorted: by properties, required, dependentRequired
_MAX_PATTERN_CELLS = 6


def objects(judge: Judge, kind: str, writer: dict[str, Any], reader: dict[str, Any], path: str) -> Inclusion:
    named = sorted(
        set(writer.get("properties", {}))
        | set(reader.get("properties", {}))
        | set(writer.get("required", []))
        | set(reader.get("required", []))
        | set(reader.get("dependentRequired", {}))
    )
    return conjoin(rule(judge, writer, reader, path, named) for rule in RULES)


def members(judge: Judge, writer: dict[str, Any], reader: dict[str, Any], path: str, named: Names) -> Inclusion:
    """``properties`` and ``required``: each named member, which the reader may require or constrain."""
    found: list[Inclusion] = []
    w_required = set(writer.get("required", []))
    for name in named:
        mine = member_schema(writer, name)
        here = f"{path}.{name}" if name.isidentifier() else f"{path}[{show(name)}]"
        if name in reader.get("required", []) and name not in w_required and not forced(writer, name):
            found.append(search(writer, reader, here, f"{judge.r} requires {name}; {judge.w} may lack it"))
        if mine is False:
            continue
        theirs = member_schema(reader, name)
        if theirs is False:
            message = f"{judge.w} allows {name}, {judge.r} rejects it (closed content model)"
            found.append(embed(refute(here, mine, message), writer, reader, name))
            continue
        outcome = judge.includes(mine, theirs, here)
        if outcome.holds is False and outcome.witness is not None:
            outcome = embed(outcome, writer, reader, name)
        found.append(outcome)
    return conjoin(found)


def other_members(judge: Judge, writer: dict[str, Any], reader: dict[str, Any], path: str, named: Names) -> Inclusion:
    """Members no property names: each class of names the patterns carve out, compared as one."""
    patterns = sorted(set(writer.get("patternProperties", {})) | set(reader.get("patternProperties", {})))
    if closed(writer):
        return YES
    w_rest = unnamed(writer)
    r_rest = unnamed(reader)
    if not patterns:
        if same(w_rest, r_rest) or r_rest is True or r_rest == {}:
            return YES
        outcome = judge.includes(w_rest, r_rest, f"{path}.*")
        return lift_member(outcome, writer, reader, fresh_name(writer, set(named)))
    if len(patterns) > _MAX_PATTERN_CELLS:
        return search(writer, reader, path, "too many patternProperties to compare exactly")
    languages = {p: regular.of(p) for p in patterns}
    if any(language is None for language in languages.values()):
        return search(writer, reader, path, "a patternProperties pattern kvlog cannot compare exactly")
    everything = regular.of(None)
    assert everything is not None
    found = []
    for chosen in itertools.product((True, False), repeat=len(patterns)):
        cell = everything.fsm
        for pattern, inside in zip(patterns, chosen, strict=True):
            language = languages[pattern]
            assert language is not None
            cell = cell.intersection(language.fsm) if inside else cell.difference(language.fsm)
        names = [n for n in regular.Language(cell).sample(16) if n not in named]
        if not names:
            continue
        member_w = member_schema(writer, names[0])
        if member_w is False:
            continue
        outcome = judge.includes(member_w, member_schema(reader, names[0]), f"{path}[{show(names[0])}]")
        found.append(lift_member(outcome, writer, reader, names[0]))
    return conjoin(found)


def property_names(judge: Judge, writer: dict[str, Any], reader: dict[str, Any], path: str, named: Names) -> Inclusion:
    """Whether every member name the writer allows is one the reader's ``propertyNames`` accepts.

    The reasons are located at ``<path> property names`` whether the writer is closed or open: a
    name's length or pattern is not the object's own, which the bare ``path`` would claim.
    """
    if "propertyNames" not in reader:
        return YES
    wanted = reader["propertyNames"]
    here = f"{path} property names"
    if unnamed(writer) is False:
        outcomes = [
            judge.includes({"const": n}, wanted, here)
            for n in sorted(writer.get("properties", {}))
            if member_schema(writer, n) is not False
        ]
        outcomes += [
            judge.includes({"type": "string", "pattern": p}, wanted, here) for p in writer.get("patternProperties", {})
        ]
        outcome = conjoin(outcomes)
    else:
        outcome = judge.includes(merge({"type": "string"}, writer.get("propertyNames", True)), wanted, here)
    if outcome.holds is False and outcome.witness is not None and isinstance(outcome.witness.value, str):
        return lift_member(Inclusion(False, outcome.reasons, None), writer, reader, outcome.witness.value)
    return outcome if outcome.holds is not False else search(writer, reader, here, first(outcome))


def property_counts(judge: Judge, writer: dict[str, Any], reader: dict[str, Any], path: str, named: Names) -> Inclusion:
    w_low = max(writer.get("minProperties", 0), len(set(writer.get("required", []))))
    w_high = writer.get("maxProperties", math.inf)
    r_low, r_high = reader.get("minProperties", 0), reader.get("maxProperties", math.inf)
    if w_low >= r_low and w_high <= r_high:
        return YES
    if closed(writer):
        w_high = min(w_high, sum(1 for n in writer.get("properties", {}) if writer["properties"][n] is not False))
        if w_low >= r_low and w_high <= r_high:
            return YES
    message = f"property count {show_range(w_low, w_high)} ({judge.w}) is not inside {show_range(r_low, r_high)}"
    return search(writer, reader, path, message)


def dependent_required(
    judge: Judge, writer: dict[str, Any], reader: dict[str, Any], path: str, named: Names
) -> Inclusion:
    found: list[Inclusion] = []
    w_required = set(writer.get("required", []))
    for name, needs in reader.get("dependentRequired", {}).items():
        if member_schema(writer, name) is False:
            continue
        have = w_required | set(writer.get("dependentRequired", {}).get(name, []))
        missing = [n for n in needs if n not in have]
        if missing:
            message = f"{judge.r} requires {', '.join(missing)} whenever {name} is present; {judge.w} does not"
            found.append(lift_member(Inclusion(False, (Reason(path, message),)), writer, reader, name))
    return conjoin(found)


ObjectRule = Callable[["Judge", dict[str, Any], dict[str, Any], str, Names], Inclusion]
RULES: tuple[ObjectRule, ...] = (members, other_members, property_names, property_counts, dependent_required)
