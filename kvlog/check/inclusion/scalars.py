"""The rules of the keywords of numbers and strings, and of a writer with only a few values to list.

Each is ``rule(judge, kind, writer, reader, path)`` as in ``kvlog.check.inclusion.applicators``: bounds
and ``multipleOf`` compare as intervals and steps; lengths and ``pattern`` as regular languages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvlog.check import regular
from kvlog.check.inclusion.bounds import divides, integral_step, interval, le, show_bound, show_range
from kvlog.check.inclusion.outcome import YES, Found, Inclusion, Reason
from kvlog.check.inclusion.witnesses import accepts, search, undecided
from kvlog.check.jsondiff import show

if TYPE_CHECKING:
    from kvlog.check.inclusion.judge import Judge


def values(judge: Judge, listed: list[Any], writer: dict[str, Any], reader: dict[str, Any], path: str) -> Inclusion:
    """A writer of ``listed`` values only: each is asked of the reader's validator, none is left to a rule."""
    unsure = False
    for value in listed:
        mine = accepts(writer, value)
        if mine is False:
            continue
        verdict = accepts(reader, value)
        if verdict is False and mine is True:
            message = f"{judge.r} rejects {show(value)}, which {judge.w} allows"
            return Inclusion(False, (Reason(path, message),), Found(value))
        unsure = unsure or verdict is not True
    return undecided(path, f"kvlog cannot check {judge.r}'s values exactly") if unsure else YES


def numbers(judge: Judge, kind: str, writer: dict[str, Any], reader: dict[str, Any], path: str) -> Inclusion:
    integral = kind == "integer" or integral_step(writer)
    w_low, w_high = interval(writer, integral)
    r_low, r_high = interval(reader, integral)
    within = le(r_low, w_low, lower=True) and le(w_high, r_high, lower=False)
    step_ok = divides(reader.get("multipleOf"), writer.get("multipleOf"), integral)
    if within and step_ok:
        return YES
    what = []
    if not le(r_low, w_low, lower=True):
        what.append(
            f"lower bound raised from {show_bound(w_low, '>')} ({judge.w}) to {show_bound(r_low, '>')} ({judge.r})"
        )
    if not le(w_high, r_high, lower=False):
        what.append(
            f"upper bound lowered from {show_bound(w_high, '<')} ({judge.w}) to {show_bound(r_high, '<')} ({judge.r})"
        )
    if not step_ok:
        what.append(f"{judge.r} requires multiples of {reader.get('multipleOf')}")
    return search(writer, reader, path, "; ".join(what))


def strings(judge: Judge, kind: str, writer: dict[str, Any], reader: dict[str, Any], path: str) -> Inclusion:
    w_min, r_min = writer.get("minLength", 0), reader.get("minLength", 0)
    w_max, r_max = writer.get("maxLength"), reader.get("maxLength")
    lengths_ok = w_min >= r_min and (r_max is None or (w_max is not None and w_max <= r_max))
    w_pattern, r_pattern = writer.get("pattern"), reader.get("pattern")
    if lengths_ok and (r_pattern is None or r_pattern == w_pattern):
        return YES
    mine, theirs = regular.of(w_pattern, w_min, w_max), regular.of(r_pattern, r_min, r_max)
    if mine is None or theirs is None:
        mine, theirs = regular.of(w_pattern), regular.of(r_pattern)
        if mine is not None and theirs is not None and lengths_ok and mine.minus(theirs).empty():
            return YES
        reason = f"{judge.r} requires pattern {show(r_pattern)}" if r_pattern != w_pattern else "length changed"
        return search(writer, reader, path, reason + "; kvlog cannot compare these patterns exactly")
    extra = mine.minus(theirs)
    if extra.empty():
        return YES
    detail = []
    if not lengths_ok:
        detail.append(f"length {show_range(w_min, w_max)} ({judge.w}) is not inside {show_range(r_min, r_max)}")
    if r_pattern != w_pattern and r_pattern is not None:
        detail.append(f"{judge.r} requires pattern {show(r_pattern)}")
    message = "; ".join(detail) or f"{judge.r} rejects strings {judge.w} accepts"
    for sample in extra.sample():
        if accepts(writer, sample) and accepts(reader, sample) is False:
            return Inclusion(False, (Reason(path, message),), Found(sample))
    return search(writer, reader, path, message)
