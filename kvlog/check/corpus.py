"""The golden-corpus rule: real old logs still migrate, line for line, into valid events.

A corpus is a directory of logs (``*.log``, ``.log.gz``, ``.log.zst``), each optionally with a
``<name>.expected.jsonl`` that says what each line must become (see ``tests/corpus/README.md``).
Lines it lists as distractors (``{"line": N, "pass": "why"}``, a reason not starting ``context:``)
may stay unparsed; any other memory line the migrator cannot read is a regression in the chain.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from kvlog.check.findings import Finding
from kvlog.check.snapshot import display_path
from kvlog.errors import KvlogError
from kvlog.inputs import open_binary
from kvlog.migration import Chain, MigrationError
from kvlog.migration.engine import Migrator, Options
from kvlog.validation import EventValidator

_LOG_SUFFIXES = (".log", ".log.gz", ".log.zst")
_EXPECTED_SUFFIX = ".expected.jsonl"


@dataclass
class CorpusResult:
    """What replaying a corpus found, and how many logs it replayed."""

    findings: list[Finding] = field(default_factory=list)
    files: int = 0


def corpus_logs(directory: Path) -> list[Path]:
    """The log files of a corpus, sorted, at any depth."""
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.name.endswith(_LOG_SUFFIXES))


def replay_corpus(directory: Path, chain: Chain, validator: EventValidator) -> CorpusResult:
    """Migrate every log of the corpus with the real engine; report unreadable lines and invalid events."""
    result = CorpusResult()
    try:
        migrator = Migrator(chain, Options(output_format="jsonl", only_events=True), validator)
    except MigrationError as exc:
        result.findings.append(Finding("KV503", f"cannot migrate: {exc}", display_path(directory)))
        return result
    for log in corpus_logs(directory):
        result.files += 1
        result.findings += _replay(log, migrator, validator)
    return result


def _replay(log: Path, migrator: Migrator, validator: EventValidator) -> list[Finding]:
    name = display_path(log)
    try:
        distractors = _distractors(log)
    except (OSError, ValueError) as exc:
        return [Finding("KV503", f"its expectation file is unreadable: {exc}", name)]
    dead: list[dict[str, Any]] = []
    out = io.BytesIO()
    try:
        with open_binary(str(log)) as stream:
            migrator.migrate(str(log), stream, out, dead.append)
    except (KvlogError, OSError) as exc:
        return [Finding("KV503", f"cannot be migrated: {exc}", name)]
    findings = [
        Finding(
            "KV501",
            f"memory line no longer migrates: {record['reason']}: {_printable(record['text'])}",
            name,
            record["line"],
        )
        for record in dead
        if record.get("line") not in distractors
    ]
    for number, line in enumerate(out.getvalue().splitlines(), 1):
        event = orjson.loads(line)
        violations = validator.violations(event)
        if violations:
            source = event.get("migrated", {}).get("line") if isinstance(event.get("migrated"), dict) else None
            detail = "; ".join(f"{v.path}: {v.message}" for v in violations[:5])
            where = f"{event.get('event')}@{event.get('schema_version')}"
            message = f"migrated event {number} ({where}) is invalid: {detail}"
            findings.append(Finding("KV502", message, name, source if isinstance(source, int) else None))
    return findings


def _distractors(log: Path) -> set[int]:
    """Lines the corpus expects to pass through unread: they may be reported as unparsed."""
    stem = log.name
    for suffix in _LOG_SUFFIXES[::-1]:
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    expected = log.with_name(stem + _EXPECTED_SUFFIX)
    if not expected.is_file():
        return set()
    lines = set()
    for row in map(orjson.loads, expected.read_bytes().splitlines()):
        reason = row.get("pass") if isinstance(row, dict) else None
        if isinstance(reason, str) and not reason.startswith("context:"):
            lines.add(row["line"])
    return lines


def _printable(text: str) -> str:
    """A log line fit for a one-line finding: control characters escaped, long lines cut."""
    escaped = text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text
    return escaped if len(escaped) <= 200 else escaped[:197] + "..."
