"""The year of a vLLM line, which prints none: each rule that sets it, and the rule said in the event.

The blocks are what users pasted into public threads (each test names its thread), whose year is known
from the thread's date; the files they are migrated from are given a modification time of today, as a
log pasted into a file now has, which the old rule took the year from.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cli_harness import kvlog

from kvlog.commands import migrate
from kvlog.migration.dating import DateContext, complete, release
from kvlog.migration.release_dates import RELEASE_DATES


def _events(tmp_path: Path, text: str, *, modified: datetime | None, **options: Any) -> list[dict[str, Any]]:
    log = tmp_path / "pasted.log"
    log.write_text(text)
    if modified is not None:
        os.utime(log, (modified.timestamp(), modified.timestamp()))
    out = io.BytesIO()
    outcome = migrate([log], stdout=out, only_events=True, **options)
    assert outcome.exit_status == 0, outcome.status_line
    return [json.loads(line) for line in out.getvalue().splitlines()]


TODAY = datetime(2026, 12, 7, 10, tzinfo=UTC)

#: vllm-project/vllm#11230 (2024-12), "Test 2.1: Version v0.6.4.post1": the API server's version line as that
#: release prints it (the thread names the release), then the lines pasted
ISSUE_11230 = (
    "INFO 12-16 02:37:50 api_server.py:585] vLLM API server version 0.6.4.post1\n"
    "INFO 12-16 02:38:24 model_runner.py:1077] Loading model weights took 38.5260 GB\n"
    "INFO 12-16 02:38:41 gpu_executor.py:113] # GPU blocks: 80, # CPU blocks: 819\n"
    "INFO 12-16 02:38:41 gpu_executor.py:117] Maximum concurrency for 8192 tokens per request: 0.16x\n"
)
#: vllm-project/vllm#24162 (2025-09): a development build that says the day it was built
PR_24162 = (
    "INFO 09-03 16:28:08 [__init__.py:241] Automatically detected platform cuda.\n"
    "INFO 09-03 16:28:10 [api_server.py:1882] vLLM API server version 0.10.2.dev378+g4d7fe40fc.d20250829\n"
    "INFO 09-03 16:28:23 [core.py:75] Initializing a V1 LLM engine (v0.10.2.dev378+g4d7fe40fc.d20250829) with "
    "config: model='/data/datasets/models-hf/Qwen2.5-0.5B/', speculative_config=None\n"
    "(EngineCore_0 pid=1399537) INFO 09-03 16:28:40 [gpu_worker.py:277] Available KV cache memory: 112.61 GiB\n"
)
#: vllm-project/vllm#12529 (2025-03): a development build of a version never released (0.8.0 followed 0.7.3)
ISSUE_12529 = (
    "INFO 03-12 14:57:29 [__init__.py:256] Automatically detected platform cuda.\n"
    "INFO 03-12 14:57:31 [api_server.py:912] vLLM API server version 0.7.4.dev390+gdebd6bbf\n"
    "INFO 03-12 14:58:02 [gpu_worker.py:217] Available KV cache memory: 58.72 GiB\n"
)


@pytest.mark.parametrize(
    ("block", "year", "said"),
    [
        (ISSUE_11230, 2024, "vLLM 0.6.4.post1, released 2024-11-"),
        (PR_24162, 2025, "built on 2025-08-29"),
        (ISSUE_12529, 2025, "newer than 0.7.3 (released 2025-02-20)"),
    ],
)
def test_the_release_that_printed_a_pasted_block_bounds_its_year(
    tmp_path: Path, block: str, year: int, said: str
) -> None:
    events = _events(tmp_path, block, modified=TODAY)
    assert events
    version_line = next(n for n, line in enumerate(block.splitlines(), 1) if "version" in line or "engine (v" in line)
    for event in events:
        assert event["timestamp"].startswith(f"{year}-"), event
        inferred = event["migrated"]["inferred"]["timestamp"]
        assert inferred["rule"] == "release-line"
        assert said in inferred["evidence"]
        assert inferred["evidence_line"] >= version_line
        # both years fit before today's change of the file: which one was taken, and why, is said
        assert f"{year + 1} would fit too, the year nearest the release is taken" in inferred["evidence"]


def test_without_the_release_line_the_wordings_releases_bound_the_year(tmp_path: Path) -> None:
    """Without the version line, the releases that printed the block's wordings tell the year (2024 is true).

    The file changed on 2026-12-07, of which the old rule took 2025 for a 12-16 line. But the
    wordings are old: no release up to 0.6.2 prints `Maximum concurrency for N tokens per request`, and
    the releases since 0.7.0 (2025-01-27) print `Loading model weights took X GB` no more: the only
    12-16 between is 2024's. The evidence names the release and the line whose wording says it.
    """
    without = "".join(line for line in ISSUE_11230.splitlines(keepends=True) if "version" not in line)
    events = _events(tmp_path, without, modified=TODAY)
    assert {event["timestamp"][:4] for event in events} == {"2024"}
    inferred = [event["migrated"]["inferred"]["timestamp"] for event in events]
    assert {said["rule"] for said in inferred} == {"wording-release"}
    last = inferred[-1]
    assert "no vLLM release up to 0.6.2 (released 2024-09-25) prints the wording of line 3" in last["evidence"]
    assert "no release since 2025-01-27 prints it" in last["evidence"]
    assert last["evidence_line"] == 3


def test_a_wording_the_newest_release_prints_leaves_the_year_to_the_files_change(tmp_path: Path) -> None:
    """`Available KV cache memory` is printed by every release since 0.9.1: the window says nothing the
    file's change (2026-12-07) does not, so the old rule stands for a file; text no file holds has no such
    change, and takes the first year after the window opens (2025, the thread's), not after today."""
    without = "".join(line for line in PR_24162.splitlines(keepends=True) if "version" not in line)
    without = without.replace("Initializing a V1 LLM engine (v0.10.2.dev378+g4d7fe40fc.d20250829) with ", "")
    [event] = _events(tmp_path, without, modified=TODAY)
    assert event["timestamp"] == "2026-09-03T16:28:40Z"
    assert event["migrated"]["inferred"]["timestamp"]["rule"] == "date-not-on-line"
    done = kvlog("migrate", "--only-events", "-", stdin=without.encode())
    assert done.returncode == 0, done.stderr
    piped = json.loads(done.stdout)
    assert piped["timestamp"] == "2025-09-03T16:28:40Z"
    inferred = piped["migrated"]["inferred"]["timestamp"]
    assert inferred["rule"] == "wording-release"
    assert "no vLLM release up to 0.9.0.1 (released 2025-05-30) prints the wording of line " in inferred["evidence"]
    assert "2026 would fit too: the year nearest the release is taken" in inferred["evidence"]


def test_a_day_no_year_of_the_window_has_is_said_so() -> None:
    """29 February under a wording whose releases were current from 2024-04-24 to 2025-01-27 (none has one)."""
    line = "INFO 02-29 10:00:01 model_runner.py:1] Loading model weights took 1.5000 GB\n"
    done = kvlog("migrate", "--only-events", "-", stdin=line.encode())
    assert done.returncode == 0, done.stderr
    event = json.loads(done.stdout)
    inferred = event["migrated"]["inferred"]["timestamp"]
    assert inferred["rule"] == "wording-release"
    assert "no year has the day" in inferred["evidence"]
    assert event["timestamp"][:4] <= str(datetime.now(UTC).year)  # never a year that has not come


def test_a_release_line_with_no_change_date_gives_the_first_fitting_year() -> None:
    """Standard input: no file, no change date; the first such day on or after the release, and no ambiguity."""
    done = kvlog("migrate", "--only-events", "-", stdin=PR_24162.encode())
    assert done.returncode == 0, done.stderr
    event = json.loads(done.stdout)
    assert event["timestamp"] == "2025-09-03T16:28:40Z"
    evidence = event["migrated"]["inferred"]["timestamp"]["evidence"]
    assert evidence.endswith("the first 09-03 since 2025-08-29")


def test_a_day_before_the_release_in_its_year_is_of_the_next(tmp_path: Path) -> None:
    text = "INFO 01-05 10:00:00 api_server.py:1] vLLM API server version 0.6.4.post1\n" + (
        "INFO 01-05 10:00:01 gpu_executor.py:113] # GPU blocks: 80, # CPU blocks: 819\n"
    )
    [event] = _events(tmp_path, text, modified=None)
    assert event["timestamp"] == "2025-01-05T10:00:01Z"  # 0.6.4.post1 came out in 2024-11


def test_the_files_last_change_bounds_the_release_range_from_above(tmp_path: Path) -> None:
    """Changed in 2025-02: of 2024-12-16 and 2025-12-16, only the first is not after the change."""
    [_, blocks, _] = _events(tmp_path, ISSUE_11230, modified=datetime(2025, 2, 1, tzinfo=UTC))
    assert blocks["timestamp"] == "2024-12-16T02:38:41Z"
    evidence = blocks["migrated"]["inferred"]["timestamp"]["evidence"]
    assert "nor after the file's last change (2025-02-01)" in evidence and "would fit too" not in evidence


def test_the_year_option_is_taken_over_every_other_rule(tmp_path: Path) -> None:
    events = _events(tmp_path, ISSUE_11230, modified=TODAY, year=2031)
    assert {event["timestamp"][:4] for event in events} == {"2031"}
    assert {json.dumps(event["migrated"]["inferred"]["timestamp"]) for event in events} == {
        json.dumps({"rule": "year-option", "evidence": "the line prints no year; --year 2031"})
    }


def test_the_year_option_on_the_command_line(tmp_path: Path) -> None:
    log = tmp_path / "pasted.log"
    log.write_text(ISSUE_12529)
    done = kvlog("migrate", "--only-events", "--year", "2019", str(log))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["timestamp"] == "2019-03-12T14:58:02Z"
    refused = kvlog("migrate", "--year", "0", str(log))
    assert refused.returncode == 2 and b"--year" in refused.stderr


@pytest.mark.parametrize("command", ["summarize", "plot", "follow"])
def test_every_command_that_reads_logs_takes_the_year(command: str) -> None:
    done = kvlog(command, "--help")
    assert done.returncode == 0 and b"--year YYYY" in done.stdout


def test_a_line_without_time_takes_the_nearest_dated_line_whose_year_was_inferred(tmp_path: Path) -> None:
    """Bare lines in a vLLM paste: before the first dated line, its time; after one, the last one's; said so."""
    text = "Available KV cache memory: 1.00 GiB\n" + ISSUE_12529 + "Available KV cache memory: 2.00 GiB\n"
    first, dated, last = _events(tmp_path, text, modified=TODAY)
    assert first["timestamp"] == dated["timestamp"] == last["timestamp"] == "2025-03-12T14:58:02Z"
    assert first["migrated"]["inferred"]["timestamp"] == {
        "rule": "next-line-timestamp",
        "evidence": "the line has no timestamp, nor any line before it; the next one printed",
        "evidence_line": 4,
    }
    assert last["migrated"]["inferred"]["timestamp"] == {
        "rule": "previous-line-timestamp",
        "evidence": "the line has no timestamp; the last one printed before it, whose own date was inferred",
        "evidence_line": 4,
    }


def test_a_line_without_time_in_a_file_that_tells_none_is_the_epoch_said_so(tmp_path: Path) -> None:
    [event] = _events(tmp_path, "Available KV cache memory: 1.00 GiB\nno memory here\n", modified=TODAY)
    assert event["timestamp"] == "1970-01-01T00:00:00Z"
    assert event["migrated"]["inferred"]["timestamp"] == {
        "rule": "no-timestamp",
        "evidence": "the line has no timestamp, nor any line read near it: 1970-01-01 stands for it",
    }


def test_a_whole_date_printed_before_is_taken_over_the_release() -> None:
    """A line that printed its whole date tells the year better than a bound does."""
    context = DateContext(last_dated=("2027-01-01T00:00:00Z", 3), release=release("vllm", "0.6.4.post1", 1))
    event: dict[str, Any] = {"migrated": {}}
    complete(event, "06-01T10:00:00", context)
    assert event["timestamp"] == "2027-06-01T10:00:00Z"
    assert event["migrated"]["inferred"]["timestamp"]["rule"] == "date-not-on-line"


def test_a_29_february_takes_the_first_leap_year_after_the_release() -> None:
    context = DateContext(release=release("vllm", "0.6.4.post1", 1))
    event: dict[str, Any] = {"migrated": {}}
    complete(event, "02-29T10:00:00", context)
    assert event["timestamp"] == "2028-02-29T10:00:00Z"


@pytest.mark.parametrize(
    ("version", "since"),
    [
        ("0.10.1", "2025-08-19"),
        ("0.10.1.1", "2025-08-20"),
        ("0.6.3.post1", "2024-10-17"),
        ("0.6.3+cu124", "2024-10-14"),  # a local build of the release
        ("0.6.4rc1", "2024-10-17"),  # a pre-release: newer than the release before (0.6.3.post1)
        ("99.0.0", RELEASE_DATES["vllm"][-1][1]),  # newer than the table: not older than its newest release
    ],
)
def test_a_version_is_bounded_by_the_newest_release_not_newer_than_it(version: str, since: str) -> None:
    bound = release("vllm", version, 1)
    assert bound is not None and bound.since == since


def test_a_version_older_than_every_release_is_not_bounded() -> None:
    assert release("vllm", "0.0.0.dev1", 1) is None
    assert release("vllm", "not a version", 1) is None


def test_the_release_table_is_what_its_script_writes() -> None:
    """``kvlog/migration/release_dates.py`` is generated: a hand edit shows against the script's rendering."""
    script = Path(__file__).resolve().parent.parent / "scripts" / "release_dates.py"
    spec = importlib.util.spec_from_file_location("release_dates_script", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = Path(module.MODULE).read_text(encoding="utf-8")
    assert module.render(module.read(text)) == text
    for server in ("sglang", "vllm"):
        dates = [day for _, day in RELEASE_DATES[server]]
        assert dates == sorted(dates) and len(dates) > 50
