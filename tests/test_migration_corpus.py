"""The golden corpus: `kvlog migrate` (in process) over logs written from every generation in the reference.

Each ``tests/corpus/<name>.log`` has a hand-written ``<name>.expected.jsonl`` with one entry per line:
either ``pass`` (the line must come out byte for byte) or the event the line must become, with its
fields, its byte counts as printed (``"36.88 GiB"``: the test derives the exact interval the printed
figure stands for), its ranks and timestamp, and which fields must be inferred and from which lines.
The expectations come from ``/work/shared/reference/sglang-log-formats.md``, not from running the tool.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from cli_harness import kvlog

from kvlog.schema.catalog import default_catalog

CORPUS = Path(__file__).parent / "corpus"
NAMES = sorted(p.name.removesuffix(".expected.jsonl") for p in CORPUS.glob("*.expected.jsonl"))

#: printed unit -> bytes per unit; the number of decimals printed gives the precision
UNITS = {"GiB": Decimal(1 << 30), "GB": Decimal(10**9), "KiB": Decimal(1 << 10)}


def split_lines(data: bytes) -> list[bytes]:
    """Lines with their terminators; only ``\\n`` ends a line (a lone ``\\r`` is part of it)."""
    lines = data.split(b"\n")
    out = [line + b"\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


@cache
def migrate(name: str, *options: str) -> bytes:
    result = kvlog("migrate", str(CORPUS / f"{name}.log"), *options)
    assert result.returncode == 0, f"kvlog migrate {name}.log {' '.join(options)}: {result.stderr.decode()}"
    return result.stdout


@cache
def expectations(name: str) -> dict[int, dict[str, Any]]:
    rows = [json.loads(line) for line in (CORPUS / f"{name}.expected.jsonl").read_text().splitlines()]
    by_line = {row["line"]: row for row in rows}
    assert len(by_line) == len(rows), f"{name}: a line is listed twice"
    return by_line


def source_lines(name: str) -> list[bytes]:
    return split_lines((CORPUS / f"{name}.log").read_bytes())


@dataclass(frozen=True)
class Printed:
    """A figure as the log printed it: the centre of the interval and its half-width, in bytes."""

    centre: Decimal
    half_width: Decimal

    @classmethod
    def parse(cls, text: str) -> Printed:
        number, unit = text.split()
        decimals = len(number.partition(".")[2])
        per_unit = UNITS[unit]
        exact = unit == "KiB"  # a granularity: always a whole number of KiB
        return cls(Decimal(number) * per_unit, Decimal(0) if exact else Decimal("0.5") * per_unit / 10**decimals)


def event_cases() -> list[Any]:
    return [
        pytest.param(name, number, id=f"{name}:{number}")
        for name in NAMES
        for number, row in expectations(name).items()
        if "event" in row
    ]


def the_event(name: str, number: int) -> dict[str, Any]:
    out = split_lines(migrate(name))
    line = out[number - 1]
    try:
        event = json.loads(line)
    except ValueError:
        pytest.fail(f"{name}.log:{number} was not recognised; it came out as {line!r}")
    assert isinstance(event, dict), line
    return event


@pytest.mark.parametrize("name", NAMES)
def test_expectations_cover_every_line(name: str) -> None:
    assert sorted(expectations(name)) == list(range(1, len(source_lines(name)) + 1))


@pytest.mark.parametrize("name", NAMES)
def test_line_count_preserved_and_other_lines_unchanged(name: str) -> None:
    source, out = source_lines(name), split_lines(migrate(name))
    assert len(out) == len(source)
    for number, row in expectations(name).items():
        if "pass" in row:
            assert out[number - 1] == source[number - 1], f"{name}.log:{number} ({row['pass']}) was altered"


@pytest.mark.parametrize(("name", "number"), event_cases())
def test_memory_line_becomes_the_right_event(name: str, number: int) -> None:
    row, event = expectations(name)[number], the_event(name, number)
    assert (event["event"], event["schema_version"]) == (row["event"], default_catalog().latest(row["event"]))
    for field, value in row.get("fields", {}).items():
        assert event.get(field, None) == value, f"{field}: {event.get(field)!r} != {value!r}"
    for field in row.get("absent", []):
        assert field not in event
    assert (event.get("ranks") or {}) == row["ranks"]
    if row.get("ts"):
        stamp = datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00"))
        assert stamp == datetime.fromisoformat(row["ts"]).replace(tzinfo=UTC)
    elif "ts" in row:
        assert "timestamp" in event["migrated"].get("inferred", {}), "the line printed no time: say where it came from"


@pytest.mark.parametrize(("name", "number"), event_cases())
def test_numbers_within_printed_precision(name: str, number: int) -> None:
    row, event = expectations(name)[number], the_event(name, number)
    uncertainty = event.get("migrated", {}).get("uncertainty_bytes", {})
    for field, text in row.get("bytes", {}).items():
        printed = Printed.parse(text)
        value = event[field]
        assert isinstance(value, int), f"{field} must be an integer byte count, not {value!r}"
        assert abs(value - printed.centre) <= 1, f"{field}={value} is not {text} ({printed.centre} bytes)"
        declared = uncertainty.get(field, 0)
        assert abs(declared - printed.half_width) <= 1, (
            f"{field}: printed as {text}, so the true value is within +-{printed.half_width} bytes; "
            f"migrated.uncertainty_bytes says {declared}"
        )
    exact = [f for f, v in row.get("fields", {}).items() if f.endswith("_bytes") and isinstance(v, int)]
    for field in exact:
        assert uncertainty.get(field, 0) == 0, f"{field} was read exactly, yet carries an uncertainty"


@pytest.mark.parametrize(("name", "number"), event_cases())
def test_provenance_and_inference(name: str, number: int) -> None:
    row, event = expectations(name)[number], the_event(name, number)
    migrated = event["migrated"]
    assert migrated["line"] == number
    assert Path(migrated["file"]).name == f"{name}.log"
    prefix = "kvlog-json/" if name.startswith("kvlog_json") else "sglang-text/"
    assert migrated["source_format"].startswith(prefix)
    inferred = migrated.get("inferred", {})
    for field, evidence_lines in row.get("inferred", {}).items():
        assert field in inferred, f"{field} must be marked inferred (evidence on line(s) {evidence_lines})"
        assert inferred[field]["rule"] and inferred[field]["evidence"]
        assert inferred[field].get("evidence_line") in evidence_lines, inferred[field]
    for field in row.get("read", []):
        assert field not in inferred, f"{field} is printed on the line itself, yet marked inferred: {inferred[field]}"


@pytest.mark.parametrize("name", NAMES)
def test_only_events_validate(name: str) -> None:
    events = migrate(name, "--only-events")
    expected = sum("event" in row or "current_event" in row for row in expectations(name).values())
    assert len(split_lines(events)) == expected
    check = kvlog("validate", "-", stdin=events)
    assert check.returncode == 0, check.stdout.decode() + check.stderr.decode()


@pytest.mark.parametrize("name", NAMES)
def test_to_v1_validates_as_v1(name: str) -> None:
    events = migrate(name, "--only-events", "--to", "1")
    check = kvlog("validate", "-", stdin=events)
    assert check.returncode == 0, check.stdout.decode() + check.stderr.decode()
    latest = [json.loads(line) for line in split_lines(migrate(name, "--only-events"))]
    for line, newest in zip(split_lines(events), latest, strict=True):
        event = json.loads(line)
        assert event["schema_version"] == 1, event
        if event["event"] in ("kv_pool.allocation", "kv_pool.swa_summary"):
            assert "allocation_state" in event["migrated"].get("lost", []), "v1 cannot say allocation_state: say so"
        renamed = {
            "kv_arena.ready": ("reserved_bytes", "reserved_va_bytes"),
            "kv_pool.swa_summary": ("mem_usage_bytes", "total_bytes"),
        }
        if event["event"] in renamed:
            old, new = renamed[event["event"]]
            assert event[old] == newest[new]
            assert event["migrated"].get("uncertainty_bytes", {}).get(old) == newest["migrated"].get(
                "uncertainty_bytes", {}
            ).get(new)


@pytest.mark.parametrize("to", [(), ("--to", "1")], ids=["latest", "v1"])
@pytest.mark.parametrize("name", NAMES)
def test_provenance_names_only_fields_the_event_has(name: str, to: tuple[str, ...]) -> None:
    for line in split_lines(migrate(name, "--only-events", *to)):
        event = json.loads(line)
        migrated = event.get("migrated", {})
        for field in [*migrated.get("inferred", {}), *migrated.get("uncertainty_bytes", {})]:
            assert field in event, f"{event['event']}@{event['schema_version']}: provenance names {field}, absent"
        for field in migrated.get("lost", []):
            assert field not in event


@pytest.mark.parametrize("name", NAMES)
def test_idempotent(name: str, tmp_path: Path) -> None:
    once = tmp_path / f"{name}.migrated.log"
    once.write_bytes(migrate(name))
    twice = kvlog("migrate", str(once))
    assert twice.returncode == 0, twice.stderr.decode()
    assert twice.stdout == once.read_bytes()


@pytest.mark.parametrize("name", NAMES)
def test_no_memory_line_is_dead_lettered(name: str, tmp_path: Path) -> None:
    dead = tmp_path / "dead.jsonl"
    result = kvlog("migrate", str(CORPUS / f"{name}.log"), "--dead-letter", str(dead), "-o", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr.decode()
    rows = expectations(name)
    recognised = {n for n, row in rows.items() if "event" in row or row["pass"].startswith("context:")}
    text = dead.read_text() if dead.exists() else ""
    dead_lines = {json.loads(line)["line"] for line in text.splitlines() if line.strip()}
    assert not dead_lines & recognised, f"recognised lines dead-lettered: {sorted(dead_lines & recognised)}"


def test_keep_original_keeps_the_line() -> None:
    name = "postcapture_before_fix_2026_07"
    out, source = split_lines(migrate(name, "--keep-original")), source_lines(name)
    for number, row in expectations(name).items():
        if "event" in row:
            original = json.loads(out[number - 1])["migrated"]["original"]
            assert original.rstrip("\r\n") == source[number - 1].decode().rstrip("\r\n")


def test_text_format_tells_the_truth() -> None:
    """``--format text`` writes today's wording: the inferred VA bounds say so, the drafts stay allocated."""
    out = split_lines(migrate("postcapture_before_fix_2026_07", "--format", "text"))
    source = source_lines("postcapture_before_fix_2026_07")
    assert len(out) == len(source)
    assert b"KvVmmArena[0] ready: device=0 reserved_va=78.8 GiB granularity=2048 KiB" in out[4]
    assert b"KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 1933312, K size: 36.88 GB" in out[6]
    assert b"KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1933312, K size: 0.46 GB" in out[9]
    assert b"SWAKVPool VA upper bound: 18.22 GB, swa size: 1061120, full size: 1326400" in out[23]
    assert b"KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1061120" in out[26]
    assert (
        out[12]
        == b"[2026-07-21 09:03:40 TP0] Graph capturing finished in 87.11 secs, took 2.05 GiB, avail mem=69.74 GiB\n"
    )


def test_whole_corpus_in_one_run_with_jobs_matches_file_by_file(tmp_path: Path) -> None:
    """Several inputs, one or two workers: each output is what that file alone gives, and the report counts it."""
    inputs = [str(CORPUS / f"{name}.log") for name in NAMES]
    for jobs in ("1", "2"):
        out, report = tmp_path / f"out-{jobs}", tmp_path / f"report-{jobs}.json"
        result = kvlog("migrate", *inputs, "-o", str(out), "--jobs", jobs, "--report", str(report))
        assert result.returncode == 0, result.stderr.decode()
        for name in NAMES:
            assert (out / f"{name}.log").read_bytes() == migrate(name), f"--jobs {jobs}: {name}.log differs"
        counts = json.loads(report.read_text())
        assert counts["files"] == len(NAMES)
        assert counts["lines"] == sum(len(source_lines(name)) for name in NAMES)
        expected: dict[str, int] = {}
        for name in NAMES:
            for row in expectations(name).values():
                event = row.get("event") or row.get("current_event")
                if event:
                    key = f"{event}@{default_catalog().latest(event)}"
                    expected[key] = expected.get(key, 0) + 1
        assert counts["events_by_event"] == expected


ARENA_LINE = b"[2026-07-21 09:02:11 TP0] KvVmmArena[0] ready: device=0 reserved=78.8 GiB granularity=2048 KiB\n"
POOL_LINE = (
    b"[2026-07-21 09:02:11 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1933312, "
    b"K size: 36.88 GB, V size: 36.88 GB\n"
)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_context_is_per_input_file(tmp_path: Path, jobs: str) -> None:
    """An arena line at the end of one file says nothing about a pool line at the start of the next."""
    first, second, both = tmp_path / "a.log", tmp_path / "b.log", tmp_path / "both.log"
    first.write_bytes(ARENA_LINE)
    second.write_bytes(POOL_LINE)
    both.write_bytes(ARENA_LINE + POOL_LINE)
    apart = kvlog("migrate", str(first), str(second), "--jobs", jobs)
    together = kvlog("migrate", str(both))
    assert apart.returncode == together.returncode == 0, apart.stderr.decode() + together.stderr.decode()
    assert json.loads(split_lines(apart.stdout)[1])["allocation_state"] == "allocated"
    assert json.loads(split_lines(together.stdout)[1])["allocation_state"] == "va_upper_bound"


def test_gzip_in_and_out(tmp_path: Path) -> None:
    """A compressed log migrates to a compressed result with the same content as the plain one."""
    name = "postcapture_before_fix_2026_07"
    packed, out = tmp_path / f"{name}.log.gz", tmp_path / f"{name}.migrated.log.gz"
    packed.write_bytes(gzip.compress((CORPUS / f"{name}.log").read_bytes()))
    result = kvlog("migrate", str(packed), "-o", str(out))
    assert result.returncode == 0, result.stderr.decode()
    lines = split_lines(gzip.decompress(out.read_bytes()))
    for number, (got, plain) in enumerate(zip(lines, split_lines(migrate(name)), strict=True), 1):
        if "pass" in expectations(name)[number]:
            assert got == plain
        else:
            got_event, plain_event = json.loads(got), json.loads(plain)
            assert got_event["migrated"].pop("file") == str(packed)
            plain_event["migrated"].pop("file")
            assert got_event == plain_event


def test_standard_input() -> None:
    name = "gen2_2025"
    result = kvlog("migrate", "-", stdin=(CORPUS / f"{name}.log").read_bytes())
    assert result.returncode == 0, result.stderr.decode()
    out = split_lines(result.stdout)
    assert len(out) == len(source_lines(name))
    for number, row in expectations(name).items():
        if "event" in row:
            assert json.loads(out[number - 1])["migrated"]["file"] is None
        else:
            assert out[number - 1] == source_lines(name)[number - 1]


def test_text_format_of_a_log_in_todays_wording_is_the_log() -> None:
    """Reading and writing share one grammar: a log already in today's wording comes back byte for byte."""
    name = "postcapture_after_fix_2026_09"
    assert migrate(name, "--format", "text") == (CORPUS / f"{name}.log").read_bytes()


@pytest.mark.parametrize("name", ["postcapture_before_fix_2026_07", "hybrid_swa_2026", "gen1_early_2025"])
def test_legacy_format_of_an_old_log_is_the_log(name: str) -> None:
    """Old parsers fed with --format legacy see exactly what sglang printed, inferred VA bounds included."""
    assert migrate(name, "--format", "legacy") == (CORPUS / f"{name}.log").read_bytes()
