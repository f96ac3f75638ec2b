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

from kvlog.check.errors import Refused
from kvlog.check.files import entries, open_log, read_file
from kvlog.check.findings import Finding
from kvlog.check.snapshot import display_path
from kvlog.errors import KvlogError
from kvlog.io.compression import with_compressed
from kvlog.migration import Chain, MigrationError
from kvlog.migration.engine import MigrateOptions, Migrator
from kvlog.schema.event_validator import EventValidator
from kvlog.text.printable import LOG_REPORT, printable

_LOG_SUFFIXES = with_compressed(".log")
_EXPECTED_SUFFIX = ".expected.jsonl"


@dataclass
class CorpusResult:
    """What replaying a corpus found, and how many logs it replayed."""

    findings: list[Finding] = field(default_factory=list)
    files: int = 0


def corpus_logs(directory: Path) -> list[Path]:
    """The log files of a corpus, sorted, at any depth (links and other non-files included, to be refused)."""
    return entries(directory, lambda name: name.endswith(_LOG_SUFFIXES))


def replay_corpus(directory: Path, chain: Chain, validator: EventValidator, root: Path) -> CorpusResult:
    """Migrate every log of the corpus with the real engine; report unreadable lines and invalid events.

    Only regular files inside ``root`` are read (``kvlog.check.files``), a log up to ``LOG_BYTES``.
    """
    result = CorpusResult()
    try:
        migrator = Migrator(chain, MigrateOptions(output_format="jsonl", only_events=True), validator)
    except MigrationError as exc:
        result.findings.append(Finding("KV503", f"cannot migrate: {exc}", display_path(directory)))
        return result
    for log in corpus_logs(directory):
        result.files += 1
        result.findings += _replay(log, migrator, validator, root)
    return result


def _replay(log: Path, migrator: Migrator, validator: EventValidator, root: Path) -> list[Finding]:
    name = display_path(log)
    expected = _expectation_file(log)
    try:
        distractors = _distractors(expected, root) if expected is not None else set()
    except _BadExpectation as exc:
        return [Finding("KV503", exc.reason, display_path(exc.path), exc.line)]
    dead: list[dict[str, Any]] = []
    out = io.BytesIO()
    try:
        with open_log(log, root) as stream:
            migrator.migrate(str(log), stream, out, dead.append)
    except Refused as exc:
        return [Finding("KV503", str(exc), name)]
    except (KvlogError, OSError) as exc:
        return [Finding("KV503", f"cannot be migrated: {exc}", name)]
    except Exception as exc:  # noqa: BLE001 - the engine on a pull request's log: any failure is a finding
        return [Finding("KV503", f"cannot be migrated: {type(exc).__name__}: {exc}", name)]
    findings = [
        Finding(
            "KV501",
            f"memory line no longer migrates: {record['reason']}: {_quoted(record['text'])}",
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


def _expectation_file(log: Path) -> Path | None:
    """``<name>.expected.jsonl`` beside ``log``, if there is one (a link or FIFO counts: it is refused)."""
    stem = log.name
    for suffix in _LOG_SUFFIXES[::-1]:
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    expected = log.with_name(stem + _EXPECTED_SUFFIX)
    return expected if expected.exists() or expected.is_symlink() else None


class _BadExpectation(Exception):
    def __init__(self, path: Path, reason: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.path, self.reason, self.line = path, reason, line


def _distractors(expected: Path, root: Path) -> set[int]:
    """Lines the corpus expects to pass through unread: they may be reported as unparsed.

    Every row must be a JSON object with a positive integer ``line``; a row that is not is reported
    at its own line of the expectation file.
    """
    try:
        rows = read_file(expected, root).splitlines()
    except Refused as exc:
        raise _BadExpectation(expected, str(exc)) from None
    lines = set()
    for number, text in enumerate(rows, 1):
        try:
            row = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise _BadExpectation(expected, f"invalid JSON: {exc.msg} (column {exc.colno})", number) from None
        line = row.get("line") if isinstance(row, dict) else None
        if type(line) is not int or line < 1:
            raise _BadExpectation(expected, 'each row is a JSON object with "line": a line number (1, 2, ...)', number)
        reason = row.get("pass")
        if isinstance(reason, str) and not reason.startswith("context:"):
            lines.add(line)
    return lines


def _quoted(text: str) -> str:
    """A server's log line fit for a one-line finding: escaped as validate escapes log text, long lines cut."""
    escaped = printable(text, escaping=LOG_REPORT)
    return escaped if len(escaped) <= 200 else escaped[:197] + "..."
