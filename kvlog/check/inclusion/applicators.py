"""The rules of the applicators: each judges one reader part made of that applicator alone.

The applicators are ``allOf``, ``anyOf``, ``oneOf``, ``not``, ``if``/``then``/``else`` and
``dependentSchemas``.

A rule is ``rule(judge, kind, writer, reader, path)``: ``writer`` is one branch of the writer, of
JSON type ``kind``; ``reader`` the part; ``judge`` answers the sub-questions. ``kvlog.check.inclusion.keywords``
is the table that finds a part's rule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from kvlog.check import regular
from kvlog.check.inclusion.algebra import merge
from kvlog.check.inclusion.bounds import empty_above, interval, le, point_between, sort_key
from kvlog.check.inclusion.kinds import admits, covers
from kvlog.check.inclusion.members import member_schema
from kvlog.check.inclusion.outcome import YES, Found, Inclusion, Reason, conjoin
from kvlog.check.inclusion.witnesses import accepts, refute, search

if TYPE_CHECKING:
    from kvlog.check.inclusion.judge import Judge


def all_of(judge: Judge, kind: str, writer: dict[str, Any], reader: dict[str, Any], path: str) -> Inclusion:
    return conjoin(judge.includes(writer, member, path) for member in reader["allOf"])


def any_of(judge: Judge, kind: str, writer: dict[str, Any], reader: dict[str, Any], path: str) -> Inclusion:
    members = reader["anyOf"]
    relevant = _branches(judge, kind, writer, members, path, keyword="anyOf")
    if isinstance(relevant, Inclusion):
        return relevant
    outcomes = [judge.includes(writer, m, path) for m in relevant]
    if any(o.holds is True for o in outcomes):
        return YES
    if len(relevant) == 1:
        return outcomes[0]
    message = f"no single anyOf branch of {judge.r} covers {judge.w}"
    union = _union(kind, writer, relevant)
    if union is True:
        return YES
    if isinstance(union, Found) and accepts(writer, union.value) and accepts({"anyOf": members}, union.value) is False:
        return Inclusion(
            False, (Reason(path, f"the anyOf branches of {judge.r} leave out values {judge.w} has"),), union
        )
    return search(writer, {"anyOf": members}, path, message)


def one_of(judge: Judge, kind: str, writer: dict[str, Any], reader: dict[str, Any], path: str) -> Inclusion:
    members = reader["oneOf"]
    relevant = _branches(judge, kind, writer, members, path, keyword="oneOf")
    if isinstance(relevant, Inclusion):
        return relevant
    outcomes = [judge.includes(writer, m, path) for m in relevant]
    for index, outcome in enumerate(outcomes):
        others = [m for j, m in enumerate(relevant) if j != index]
        if outcome.holds is True and all(judge.disjoint(writer, other) for other in others):
            return YES
    if len(relevant) == 1:
        return outcomes[0]
    message = f"kvlog cannot prove each {judge.w} value matches one oneOf branch"
    overlaps = {"anyOf": [merge(writer, member) for member in relevant]}  # where two branches may both match
    return search(writer, {"oneOf": members}, path, message, around=overlaps)


def _branches(
    judge: Judge, kind: str, writer: dict[str, Any], members: list[Any], path: str, *, keyword: str
) -> list[Any] | Inclusion:
    """The branches that admit ``kind`` values at all, or the refutation when none does."""
    relevant = [member for member in members if admits(member, kind)]
    if not relevant:
        return refute(path, writer, f"no {keyword} branch of {judge.r} accepts {kind} values; {judge.w} has them")
    return relevant


def not_(judge: Judge, kind: str, writer: dict[str, Any], reader: dict[str, Any], path: str) -> Inclusion:
    negated = reader["not"]
    if judge.disjoint(writer, negated):
        return YES
    return search(
        writer, {"not": negated}, path, f"{judge.r} forbids values matching a 'not' schema that {judge.w} may hold"
    )


def conditional(judge: Judge, kind: str, writer: dict[str, Any], reader: dict[str, Any], path: str) -> Inclusion:
    condition, then, otherwise = reader.get("if", True), reader.get("then", True), reader.get("else", True)
    if judge.includes(writer, condition, path).holds is True:
        return judge.includes(writer, then, path)
    if judge.disjoint(writer, condition):
        return judge.includes(writer, otherwise, path)
    if (
        judge.includes(merge(writer, condition), then, path).holds is True
        and judge.includes(writer, otherwise, path).holds is True
    ):
        return YES
    message = f"{judge.r} adds an if/then/else that {judge.w} may not satisfy"
    return search(writer, reader, path, message, around=merge(writer, condition))


def dependent_schemas(judge: Judge, kind: str, writer: dict[str, Any], reader: dict[str, Any], path: str) -> Inclusion:
    if kind != "object":
        return YES
    outcomes = []
    for name, schema in reader["dependentSchemas"].items():
        if member_schema(writer, name) is False:
            continue
        present = merge(writer, {"required": [name, *writer.get("dependentRequired", {}).get(name, [])]})
        own = writer.get("dependentSchemas", {}).get(name, True)  # the writer's own condition on it
        outcomes.append(judge.includes(merge(present, own), schema, path))
    return conjoin(outcomes)


_SCALAR_KEYS = {
    "string": frozenset({"type", "minLength", "maxLength", "pattern"}),
    "integer": frozenset({"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}),
    "number": frozenset({"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}),
}


def _union(kind: str, writer: dict[str, Any], members: list[Any]) -> Literal[True] | Found | None:
    """Whether anyOf ``members`` together cover the writer's strings or numbers: True, a value left out, or None.

    Only branches made of lengths and patterns (strings) or bounds (numbers) are joined; any other
    keyword leaves the question to the instance search.
    """
    keys = _SCALAR_KEYS.get(kind)
    if keys is None or not all(isinstance(m, dict) and set(m) <= keys and covers(m, kind) for m in members):
        return None
    if kind == "string":
        mine = regular.of(writer.get("pattern"), writer.get("minLength", 0), writer.get("maxLength"))
        theirs = [regular.of(m.get("pattern"), m.get("minLength", 0), m.get("maxLength")) for m in members]
        if mine is None or any(t is None for t in theirs):
            return None
        rest = mine
        for language in theirs:
            assert language is not None
            rest = rest.minus(language)
        if rest.empty():
            return True
        left = rest.sample(1)
        return Found(left[0]) if left else None
    if writer.get("multipleOf") is not None:
        return None
    integral = kind == "integer"
    low, high = interval(writer, integral)
    spans = sorted((interval(m, integral) for m in members), key=lambda span: sort_key(span[0]))
    reached = low  # the lowest writer value not yet known to be covered, as a lower bound (None: -inf)
    for span_low, span_high in spans:
        if empty_above(reached, high):
            return True
        if not le(span_low, reached, lower=True):
            return Found(point_between(reached, span_low, integral))  # a gap before this span
        if span_high is None:
            return True
        following = (span_high[0] + 1, True) if integral else (span_high[0], not span_high[1])
        if reached is None or sort_key(following) > sort_key(reached):
            reached = following
    return True if empty_above(reached, high) else Found(point_between(reached, None, integral))
