"""The ``--report`` of a run over many logs is the sum of the logs' own reports, however many jobs ran it.

Each file is counted apart (in a worker with ``--jobs``) and the counts are folded together in the
parent: a count that is not folded would be missing from the totals an operator reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_harness import kvlog

from kvlog.migration.report import MigrationReport

CORPUS = Path(__file__).parent / "corpus"


def _report(tmp_path: Path, name: str, *args: str | Path) -> dict[str, Any]:
    report = tmp_path / f"{name}.json"
    done = kvlog("migrate", *args, "--dry-run", "--report", report)
    assert done.returncode == 0, done.stderr
    loaded: dict[str, Any] = json.loads(report.read_text())
    return loaded


def _summed(reports: list[dict[str, Any]]) -> dict[str, Any]:
    total: dict[str, Any] = {}
    for report in reports:
        for key, value in report.items():
            if isinstance(value, int):
                total[key] = total.get(key, 0) + value
            elif isinstance(value, dict):
                counts = total.setdefault(key, {})
                for name, count in value.items():
                    counts[name] = counts.get(name, 0) + count
    return {key: dict(sorted(value.items())) if isinstance(value, dict) else value for key, value in total.items()}


def _line_count(data: bytes) -> int:
    return data.count(b"\n") + (not data.endswith(b"\n"))  # a last line without its newline counts


def test_the_report_of_many_logs_adds_up_their_own_for_any_number_of_jobs(tmp_path: Path) -> None:
    logs = sorted(CORPUS.glob("*.log"))
    assert len(logs) >= 3
    each = [_report(tmp_path, log.stem, log) for log in logs]
    expected = _summed(each)
    assert expected["files"] == len(logs)
    assert expected["lines"] == sum(_line_count(log.read_bytes()) for log in logs)
    assert (
        expected["events"]
        == sum(expected["events_by_event"].values())
        == sum(expected["events_by_source_format"].values())
    )
    assert expected["events"] > 0 and expected["inferred_fields"] and expected["companion_lines"]
    for jobs in ("1", "2"):
        whole = _report(tmp_path, f"jobs{jobs}", *logs, "--jobs", jobs)
        assert {key: value for key, value in whole.items() if key != "unparsed_sample"} == expected, jobs
        samples = [line for report in each for line in report["unparsed_sample"]]
        assert whole["unparsed_sample"] == samples[: len(whole["unparsed_sample"])], jobs


def test_versions_python_finds_equal_are_counted_apart_as_they_were_written() -> None:
    """The report's keys are formatted once per value and type: 1 and 1.0 count as 1, true (== 1) as itself."""
    report = MigrationReport()
    for version in (1, 1.0, True, 1):
        report.counted_event("kvlog-json", {"event": "kv_pool.allocation", "schema_version": version})
    assert report.by_event == {"kv_pool.allocation@1": 3, "kv_pool.allocation@true": 1}
