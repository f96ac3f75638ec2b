"""Rules across time: released versions never change, and a new version is compatible or migrated to.

The catalog at a git ref is the release record. A version present there is immutable, because
logs and parsers in the field were written against it; a version added since must be compatible
with its predecessors under the chosen mode, unless a migration carries the old events across, in
which case kvlog (unlike a schema registry) accepts the change and says which migration covers it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from kvlog.check.drafts import detect
from kvlog.check.findings import Finding
from kvlog.check.inclusion import Inclusion
from kvlog.check.jsondiff import describe_change, diff
from kvlog.check.snapshot import SchemaFile, Snapshot, locate
from kvlog.check.verdict import includes
from kvlog.schema.walk import Draft, strip_annotations

Mode = Literal["backward", "backward_transitive", "forward", "forward_transitive", "full", "full_transitive", "none"]
MODES: tuple[Mode, ...] = (
    "backward",
    "backward_transitive",
    "forward",
    "forward_transitive",
    "full",
    "full_transitive",
    "none",
)
Direction = Literal["backward", "forward"]
# cover(event, from_version, to_version): how events of from_version are carried to to_version, or None.
Cover = Callable[[str, int, int], str | None]


def comparable(resolved: Any) -> Any:
    """A dereferenced event schema reduced to what decides validity, minus its own version constant."""
    schema = strip_annotations(resolved)
    if isinstance(schema, dict) and isinstance(schema.get("properties"), dict):
        schema = {**schema, "properties": {**schema["properties"], "schema_version": {}}}
    return schema


def pairs_to_check(versions: list[int], new: int, mode: Mode) -> list[tuple[int, Direction]]:
    """The (older version, direction) pairs ``mode`` asks of ``new``: its predecessor, or all older ones."""
    if mode == "none":
        return []
    older = [v for v in versions if v < new]
    if not older:
        return []
    against = older if mode.endswith("_transitive") else [max(older)]
    directions: list[Direction] = {"backward": ["backward"], "forward": ["forward"], "full": ["backward", "forward"]}[
        mode.removesuffix("_transitive")  # type: ignore[assignment]
    ]
    return [(old, direction) for old in sorted(against, reverse=True) for direction in directions]


@dataclass(frozen=True)
class Version:
    """One version of an event for comparison: its number, dereferenced schema and draft."""

    number: int
    resolved: Any
    draft: Draft


def version_outcome(old: Version, new: Version, direction: Direction) -> Inclusion:
    """Backward: can readers of ``new`` read ``old`` events; forward: can readers of ``old`` read ``new`` ones."""
    writer, reader = (old, new) if direction == "backward" else (new, old)
    return includes(
        comparable(writer.resolved),
        comparable(reader.resolved),
        drafts=(writer.draft, reader.draft),
        labels=(f"v{writer.number}", f"v{reader.number}"),
    )


def counterexample(outcome: Inclusion, writer_label: str) -> str | None:
    """The instance that proves a break, as compact JSON, with the writer's own version number in it."""
    if outcome.witness is None:
        return None
    instance = outcome.witness.value
    if isinstance(instance, dict) and "schema_version" in instance:  # compared without its version constant
        instance = {**instance, "schema_version": int(writer_label.removeprefix("v"))}
    return json.dumps(instance, separators=(",", ":"), ensure_ascii=False)  # any integer, however large


def describe(outcome: Inclusion, writer_label: str) -> str:
    """The reasons of a verdict that is not "compatible", and the instance that proves a break."""
    reasons = "; ".join(str(reason) for reason in outcome.reasons)
    example = counterexample(outcome, writer_label)
    return reasons if example is None else f"{reasons}; for example this {writer_label} event breaks: {example}"


@dataclass(frozen=True)
class Evolution:
    """The catalog now and at the release it is compared with, each with its dereferenced schemas."""

    current: Snapshot
    released: Snapshot
    resolved_now: dict[tuple[str, int], Any]
    resolved_then: dict[tuple[str, int], Any]

    def check(self, mode: Mode, cover: Cover) -> list[Finding]:
        """Immutability of what was released, and compatibility (or migration) of what was added since."""
        findings: list[Finding] = []
        for event, versions in sorted(self.released.versions.items()):
            for version, then in sorted(versions.items()):
                now = self.current.versions.get(event, {}).get(version)
                if now is None and then.rel in self.current.unread:
                    continue  # there, but unreadable: reported as such, not as removed
                if now is None:
                    siblings = self.current.versions.get(event, {})
                    display = next(iter(siblings.values())).display if siblings else then.display
                    message = (
                        f"{event}@{version} was released at {self.released.label} and has been removed ({then.rel})"
                    )
                    findings.append(Finding("KV203", message, display))
                else:
                    findings += self._immutable(event, version, then, now)
        for event, versions in sorted(self.current.versions.items()):
            for new in sorted(versions):
                if new in self.released.versions.get(event, {}) or (event, new) not in self.resolved_now:
                    continue
                for old, direction in pairs_to_check(sorted(versions), new, mode):
                    if (event, old) in self.resolved_now:
                        findings += self._compatibility(event, old, new, direction, mode=mode, cover=cover)
        return findings

    def _immutable(self, event: str, version: int, then: SchemaFile, now: SchemaFile) -> list[Finding]:
        key = (event, version)
        own = diff(strip_annotations(then.document), strip_annotations(now.document))
        if key in self.resolved_then and key in self.resolved_now:
            semantic = diff(strip_annotations(self.resolved_then[key]), strip_annotations(self.resolved_now[key]))
        else:
            semantic = own
        ref = self.released.label
        if semantic:
            through = "" if own else " (through a shared definition)"
            following = max(self.current.versions[event]) + 1
            return [
                Finding(
                    "KV201",
                    f"{event}@{version} was released at {ref} and must not change{through}: "
                    f"{describe_change(pointer, old, new)}; add v{following} (with a migration) instead",
                    now.display,
                    locate(now.text, pointer),
                )
                for pointer, old, new in semantic
            ]
        reworded = diff(then.document, now.document)
        if not reworded:
            return []
        changes = "; ".join(describe_change(pointer, old, new) for pointer, old, new in reworded)
        message = f"{event}@{version} was released at {ref}; its annotations changed: {changes}"
        return [Finding("KV202", message, now.display, locate(now.text, reworded[0][0]))]

    def _compatibility(
        self, event: str, old: int, new: int, direction: Direction, *, mode: Mode, cover: Cover
    ) -> list[Finding]:
        outcome = self._outcome(event, old, new, direction)
        if outcome.holds is True:
            return []
        file = self.current.versions[event][new]
        writer = f"v{old}" if direction == "backward" else f"v{new}"
        reasons = describe(outcome, writer)
        line = _line_of_first(file.text, outcome)
        verdict = "not" if outcome.holds is False else "not provably"
        carried = cover(event, old, new) if direction == "backward" else cover(event, new, old)
        if carried is not None:
            message = f"{event}@{new} is {verdict} {direction}-compatible with v{old} ({reasons}); covered by {carried}"
            return [Finding("KV205", message, file.display, line, counterexample(outcome, writer))]
        remedy = (
            f"a migration v{old} -> v{new}" if direction == "backward" else f"an invertible migration v{old} -> v{new}"
        )
        incompatible = f"{event}@{new} is {verdict} {direction}-compatible with v{old} in compatibility mode {mode}"
        message = f"{incompatible}: {reasons}; add {remedy}"
        return [Finding("KV204", message, file.display, line, counterexample(outcome, writer))]

    def _outcome(self, event: str, old: int, new: int, direction: Direction) -> Inclusion:
        versions = [
            Version(v, self.resolved_now[event, v], detect(self.current.versions[event][v].document))
            for v in (old, new)
        ]
        return version_outcome(versions[0], versions[1], direction)


def _line_of_first(text: str, outcome: Inclusion) -> int | None:
    """The line of the first incompatible field the new schema still names, else of its properties."""
    for reason in outcome.reasons:
        name = reason.path.removeprefix("$").lstrip(".").split(".")[0].split("[")[0]
        if name and orjson.dumps(name).decode() + ":" in text:
            return locate(text, ("properties", name))
    return locate(text, ("properties",))
