"""The driver: the reader split into parts, the writer into branches, each pair asked of its rule.

The rule is the one the keyword table names (``kvlog.check.inclusion.keywords``). The judge also
proves two schemas disjoint, which ``oneOf``, ``not`` and ``if`` need.
"""

from __future__ import annotations

from typing import Any

from kvlog.check import regular
from kvlog.check.inclusion.algebra import GROUPS, branches, conjuncts, evaluates, merge
from kvlog.check.inclusion.bounds import before, interval
from kvlog.check.inclusion.keywords import APPLICATORS, KEYWORDS, reference, typed
from kvlog.check.inclusion.kinds import NUMERIC, finite
from kvlog.check.inclusion.members import member_schema
from kvlog.check.inclusion.outcome import YES, Inclusion, conjoin
from kvlog.check.inclusion.witnesses import accepts, refute, search, undecided
from kvlog.check.instances import same

_MAX_DEPTH = 24


class Judge:
    """Decides inclusion of the writer's instances in the reader's; labels name the two sides in reasons."""

    def __init__(self, writer_label: str = "old", reader_label: str = "new") -> None:
        self.w = writer_label
        self.r = reader_label
        self._depth = 0

    def includes(self, writer: Any, reader: Any, path: str = "$") -> Inclusion:
        """Whether every instance of ``writer`` is one of ``reader``."""
        if reader is True or reader == {} or writer is False or same(writer, reader):
            return YES
        if self._depth > _MAX_DEPTH:
            return undecided(path, "the schemas nest deeper than kvlog compares")
        self._depth += 1
        try:
            return self._includes(writer, reader, path)
        finally:
            self._depth -= 1

    # -- the reader, split exactly --------------------------------------------------------------------

    def _includes(self, writer: Any, reader: Any, path: str) -> Inclusion:
        if (isinstance(writer, dict) and "$ref" in writer) or (isinstance(reader, dict) and "$ref" in reader):
            return reference(self, "", writer, reader, path)
        split = branches(writer)
        if not split:
            return YES
        if reader is False:
            return refute(path, writer, f"{self.r} accepts no value here; {self.w} does")
        held = conjuncts(writer)  # a reader part the writer itself requires holds for every writer instance
        parts = [part for part in self._reader_parts(reader) if not any(same(part, c) for c in held)]
        return conjoin(self._branch(kind, branch, part, path) for kind, branch in split for part in parts)

    def _reader_parts(self, reader: dict[str, Any]) -> list[Any]:
        """The reader as a conjunction of independent parts (``allOf`` folded in when unevaluated* needs it)."""
        reader = dict(reader)
        if evaluates(reader) and "allOf" in reader:
            members = reader.pop("allOf")
            for member in members:
                reader = merge(reader, member) if isinstance(reader, dict) else reader
            if not isinstance(reader, dict):
                return [reader]
        parts: list[Any] = []
        if "allOf" in reader and not evaluates(reader):
            parts += reader.pop("allOf")
        for group in GROUPS:
            taken = {k: reader.pop(k) for k in group if k in reader}
            if taken and not evaluates(reader):
                parts.append(taken)
            elif taken:
                reader.update(taken)
        return [reader, *parts]

    def _branch(self, kind: str, writer: dict[str, Any], reader: Any, path: str) -> Inclusion:
        """One writer branch against one reader part: the rule of the part's applicator, else of its type."""
        if reader is True or reader == {}:
            return YES
        if reader is False:
            return refute(path, writer, f"{self.r} accepts no value here; {self.w} does")
        unknown = [key for key in reader if key not in KEYWORDS]
        if unknown:  # ignoring a reader keyword would call a narrowing compatible
            return search(writer, reader, path, f"kvlog has no rule for the keyword {unknown[0]!r}")
        rules = {APPLICATORS.get(key) for key in reader}
        rule = rules.pop() if len(rules) == 1 else None  # a part of one applicator's keywords only
        if rule is not None:
            return rule(self, kind, writer, reader, path)
        if any(key in APPLICATORS or key == "$ref" for key in reader):
            return search(writer, reader, path, "the new schema mixes applicators with unevaluated keywords")
        return typed(self, kind, writer, reader, path)

    # -- disjointness ------------------------------------------------------------------------------

    def disjoint(self, a: Any, b: Any) -> bool:
        """True only when no instance satisfies both (proven); False when not proven."""
        if a is False or b is False:
            return True
        if isinstance(b, dict) and set(b) == {"not"} and self.includes(a, b["not"]).holds is True:
            return True
        for kind, left in branches(a):
            for other, right in branches(b):
                if not self._disjoint_branches(kind, left, other, right):
                    return False
        return True

    def _disjoint_branches(self, kind: str, a: dict[str, Any], other: str, b: dict[str, Any]) -> bool:
        if kind != other and {kind, other} != {"integer", "number"}:
            return True
        for one, two in ((a, b), (b, a)):
            values = finite(one)
            if values is not None and all(accepts(one, v) is False or accepts(two, v) is False for v in values):
                return True
        if kind == "object":
            # a member either side requires is in every instance of both, so both its schemas apply to it
            for name in sorted(set(a.get("required", [])) | set(b.get("required", []))):
                if self.disjoint(member_schema(a, name), member_schema(b, name)):
                    return True
        if kind == "string" and "pattern" in a and "pattern" in b:
            left_language, right_language = regular.of(a["pattern"]), regular.of(b["pattern"])
            if left_language is not None and right_language is not None:
                return bool(left_language.fsm.isdisjoint(right_language.fsm))
        if kind in NUMERIC:
            a_low, a_high = interval(a, False)
            b_low, b_high = interval(b, False)
            return before(a_high, b_low) or before(b_high, a_low)
        return False
