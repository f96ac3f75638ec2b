"""The rules of the array keywords: item counts, ``uniqueItems``, the items at each position, ``contains``.

``arrays`` is the type's rule: it answers for the whole array where one keyword decides (no array of
the writer at all; ``unevaluatedItems`` beside ``contains``), else conjoins ``RULES``, one per group
of keywords, each ``rule(judge, writer, reader, path, count)`` with the writer's item count range.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kvlog.check.inclusion.bounds import show_range
from kvlog.check.inclusion.members import item, lift_item
from kvlog.check.inclusion.outcome import YES, Inclusion, conjoin
from kvlog.check.inclusion.witnesses import search

if TYPE_CHECKING:
    from kvlog.check.inclusion.judge import Judge

Count = tuple[float, float]  # the least and the most items an array of the writer may hold


def arrays(judge: Judge, kind: str, writer: dict[str, Any], reader: dict[str, Any], path: str) -> Inclusion:
    if "unevaluatedItems" in reader and "contains" in reader:
        return search(writer, reader, path, "unevaluatedItems beside contains")
    count = _count(writer)
    if count[0] > count[1]:
        return YES
    return conjoin(rule(judge, writer, reader, path, count) for rule in RULES)


def _count(writer: dict[str, Any]) -> Count:
    """The writer's item count range, its upper end lowered where an item it forbids (``False``) stops it."""
    w_prefix = writer.get("prefixItems", [])
    w_low, w_high = writer.get("minItems", 0), writer.get("maxItems", math.inf)
    if item(writer, len(w_prefix)) is False:
        w_high = min(w_high, len(w_prefix))
    for index, member in enumerate(w_prefix):
        if member is False:
            w_high = min(w_high, index)
    return w_low, w_high


def item_count(judge: Judge, writer: dict[str, Any], reader: dict[str, Any], path: str, count: Count) -> Inclusion:
    w_low, w_high = count
    r_low, r_high = reader.get("minItems", 0), reader.get("maxItems", math.inf)
    if w_low < r_low or w_high > r_high:
        message = f"item count {show_range(w_low, w_high)} ({judge.w}) is not inside {show_range(r_low, r_high)}"
        return search(writer, reader, path, message)
    return YES


def unique_items(judge: Judge, writer: dict[str, Any], reader: dict[str, Any], path: str, count: Count) -> Inclusion:
    if reader.get("uniqueItems") and not writer.get("uniqueItems") and count[1] > 1:
        return search(writer, reader, path, f"{judge.r} requires unique items, {judge.w} does not")
    return YES


def positions(judge: Judge, writer: dict[str, Any], reader: dict[str, Any], path: str, count: Count) -> Inclusion:
    """``prefixItems``, ``items`` and ``unevaluatedItems``: each position either side names, then the rest."""
    w_high = count[1]
    found: list[Inclusion] = []
    named = max(len(writer.get("prefixItems", [])), len(reader.get("prefixItems", [])))
    for index in range(named):
        if index >= w_high:
            break
        outcome = judge.includes(item(writer, index), item(reader, index), f"{path}[{index}]")
        found.append(lift_item(outcome, writer, reader, index))
    if w_high > named:
        outcome = judge.includes(item(writer, named), item(reader, named), f"{path}[*]")
        found.append(lift_item(outcome, writer, reader, named))
    return conjoin(found)


def contains(judge: Judge, writer: dict[str, Any], reader: dict[str, Any], path: str, count: Count) -> Inclusion:
    """``contains`` with ``minContains``/``maxContains``: enough matching items, and not too many."""
    if "contains" not in reader:
        return YES
    w_low, w_high = count
    need, limit = reader.get("minContains", 1), reader.get("maxContains", math.inf)
    wanted = reader["contains"]
    enough = need == 0
    if not enough and "contains" in writer and judge.includes(writer["contains"], wanted).holds is True:
        enough = writer.get("minContains", 1) >= need
    if not enough:
        sure = sum(1 for i in range(int(min(w_low, 64))) if judge.includes(item(writer, i), wanted).holds is True)
        enough = sure >= need
    bounded = w_high <= limit
    if not bounded and writer.get("maxContains", math.inf) <= limit and "contains" in writer:
        bounded = judge.includes(wanted, writer["contains"]).holds is True  # what new counts, old counted
    if not bounded and not writer.get("prefixItems"):
        bounded = judge.disjoint(item(writer, 0), wanted)  # no item of old matches at all
    if enough and bounded:
        return YES
    what = [] if enough else [f"{judge.r} requires {need} item(s) matching 'contains' that {judge.w} may lack"]
    what += [] if bounded else [f"{judge.r} allows at most {limit} item(s) matching 'contains'; {judge.w} more"]
    return search(writer, reader, path, "; ".join(what))


ArrayRule = Callable[["Judge", dict[str, Any], dict[str, Any], str, Count], Inclusion]
RULES: tuple[ArrayRule, ...] = (item_count, unique_items, positions, contains)
