"""What a migration run did, for ``--report`` and the status line: counts that merge across workers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kvlog.io.counts import add_counts
from kvlog.migration.ops import inferred
from kvlog.schema.catalog import catalog_version
from kvlog.schema.readings import json_text

SAMPLE_SIZE = 20
_SAMPLE_TEXT = 300


@dataclass
class MigrationReport:
    """Counts over one or more inputs."""

    files: int = 0
    lines: int = 0
    events: int = 0
    by_source: Counter[str] = field(default_factory=Counter)
    by_event: Counter[str] = field(default_factory=Counter)
    inferred: Counter[str] = field(default_factory=Counter)
    companions: Counter[str] = field(default_factory=Counter)
    #: inputs by the server their lines were recognised as ("none": no line was)
    servers: Counter[str] = field(default_factory=Counter)
    unparsed_memory_lines: int = 0
    #: of the unparsed lines, those too long to be read (over 64 KiB): reported whatever their words
    overlong_lines: int = 0
    #: memory-like lines left unparsed that ``--allow-unparsed`` accepts: not counted by --strict
    allowed_unparsed_lines: int = 0
    rejected: int = 0
    #: lines written differently from how they were read (rewritten, or dropped by --only-events)
    changed_lines: int = 0
    unparsed_sample: list[dict[str, Any]] = field(default_factory=list)

    def counted_event(self, source: str, event: dict[str, Any]) -> None:
        """Count one event written, with the fields it carries as inferred.

        The event's key is formatted once per name and version (``_named``: the catalog version of a
        written version takes a lookup); a field's is an f-string of two strings, cheaper than any cache.
        """
        self.events += 1
        self.by_source[source] += 1
        name, written = event["event"], event["schema_version"]
        try:
            key = _NAMED[(_event_key, type(name), name, type(written), written)]
        except (KeyError, TypeError):
            key = _named(_event_key, name, written)
        self.by_event[key] += 1
        for field_name, note in inferred(event).items():
            self.inferred[f"{field_name}: {note.get('rule') if isinstance(note, dict) else None}"] += 1

    def unparsed(self, file: str | None, line: int, reason: str, text: str) -> None:
        """Count a line that looks like a memory line but matched no rule, keeping the first few."""
        self.unparsed_memory_lines += 1
        if len(self.unparsed_sample) < SAMPLE_SIZE:
            self.unparsed_sample.append({"file": file, "line": line, "reason": reason, "text": text[:_SAMPLE_TEXT]})

    def merge(self, other: MigrationReport) -> None:
        """Add another input's counts, and its unparsed lines while the sample has room."""
        add_counts(self, other)
        room = SAMPLE_SIZE - len(self.unparsed_sample)
        self.unparsed_sample += other.unparsed_sample[: max(room, 0)]

    def to_json(self) -> dict[str, Any]:
        """The ``--report`` document."""
        return {
            "files": self.files,
            "lines": self.lines,
            "events": self.events,
            "events_by_source_format": dict(sorted(self.by_source.items())),
            "events_by_event": dict(sorted(self.by_event.items())),
            "inferred_fields": dict(sorted(self.inferred.items())),
            "companion_lines": dict(sorted(self.companions.items())),
            "files_by_server": dict(sorted(self.servers.items())),
            "unparsed_memory_lines": self.unparsed_memory_lines,
            "overlong_lines": self.overlong_lines,
            "allowed_unparsed_lines": self.allowed_unparsed_lines,
            "rejected_events": self.rejected,
            "changed_lines": self.changed_lines,
            "unparsed_sample": self.unparsed_sample,
        }

    def status_line(self, names: Mapping[str, str] | None = None) -> str:
        """One line for standard error; ``names`` spells options as the caller does (default: by keyword)."""
        allowing = (names or {}).get("allow_unparsed", "allow_unparsed")
        return (
            f"{self.files} file(s) ({', '.join(f'{k} {v}' for k, v in sorted(self.servers.items())) or 'none'}), "
            f"{self.lines} lines, {self.events} events "
            f"({', '.join(f'{k} {v}' for k, v in sorted(self.by_source.items())) or 'none'}), "
            f"{sum(self.inferred.values())} inferred fields, {self.unparsed_memory_lines} memory-like lines unparsed"
            + (f" ({self.overlong_lines} too long to read)" if self.overlong_lines else "")
            + (f" (and {self.allowed_unparsed_lines} allowed by {allowing})" if self.allowed_unparsed_lines else "")
        )


def _event_key(name: object, written: object) -> str:
    version = catalog_version(written)  # 2.0 counts with 2, as the schema reads it
    return f"{name}@{json_text(written) if version is None else version}"


#: the report's keys by what they are formatted from: thousands of events count under a few dozen keys
_NAMED: dict[tuple[object, ...], str] = {}
_NAMED_MOST = 4096


def _named(key: Callable[[object, object], str], first: object, second: object) -> str:
    """``key(first, second)``, formatted once per kind and values (their types too: 1, 1.0 and True differ)."""
    cached = (key, type(first), first, type(second), second)
    try:
        return _NAMED[cached]
    except KeyError:
        if len(_NAMED) >= _NAMED_MOST:
            _NAMED.clear()
        text = _NAMED[cached] = key(first, second)
        return text
    except TypeError:  # a value JSON can hold that cannot be a key (a list): formatted each time
        return key(first, second)
