"""Validating JSON-lines log files against the catalog: the library behind ``kvlog validate``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import orjson

from kvlog.validation import EventValidator, Violation


@dataclass(frozen=True)
class Finding:
    """One problem at one line of one file."""

    file: str
    line: int
    event: str | None
    version: object
    violation: Violation

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}"
        if self.event is None:
            return f"{where}: {self.violation.message}"
        return f"{where}: {self.event}@{self.version}: {self.violation.path}: {self.violation.message}"


@dataclass
class Summary:
    """Counts over everything validated."""

    events: int = 0
    invalid_events: int = 0
    non_json_lines: int = 0
    skipped_lines: int = 0
    findings: int = 0
    by_event: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when nothing was wrong."""
        return self.findings == 0


def check_lines(
    name: str,
    lines: Iterable[bytes],
    summary: Summary,
    validator: EventValidator,
    *,
    skip_non_json: bool = False,
) -> Iterator[Finding]:
    """Validate each line of one input, yielding a finding for every problem and counting in ``summary``."""
    loads, is_valid = orjson.loads, validator.is_valid
    for number, line in enumerate(lines, 1):
        try:
            event = loads(line)
        except orjson.JSONDecodeError as exc:
            if not line.strip() or skip_non_json:
                summary.skipped_lines += 1
                continue
            summary.non_json_lines += 1
            summary.findings += 1
            yield Finding(name, number, None, None, Violation("$", f"not a JSON event: {exc}"))
            continue
        if type(event) is not dict:
            if skip_non_json:
                summary.skipped_lines += 1
                continue
            summary.non_json_lines += 1
            summary.findings += 1
            yield Finding(name, number, None, None, Violation("$", f"not a JSON event: a JSON {type(event).__name__}"))
            continue
        summary.events += 1
        if is_valid(event):
            continue
        summary.invalid_events += 1
        name_field = event.get("event")
        label = name_field if isinstance(name_field, str) else "?"
        summary.by_event[label] = summary.by_event.get(label, 0) + 1
        for violation in validator.violations(event):
            summary.findings += 1
            yield Finding(name, number, label, event.get("schema_version"), violation)
