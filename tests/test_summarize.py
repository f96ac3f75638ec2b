"""``kvlog summarize``: the fleet table, its figures worked out independently from the migrated events."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from cli_harness import kvlog, kvlog_text
from follow_helpers import migrated as migrated_lines

from kvlog import commands
from kvlog.errors import OptionError
from kvlog.plot.timeline import timelines
from kvlog.summary import render, summarize_runs

CORPUS = Path(__file__).resolve().parent / "corpus"
BEFORE_FIX = CORPUS / "postcapture_before_fix_2026_07.log"
GIB = 1 << 30


def migrated(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in migrated_lines(path)]


def summarized(*inputs: Path, fmt: str = "json") -> tuple[int, Any]:
    out = io.BytesIO()
    outcome = commands.summarize([str(path) for path in inputs], output_format=fmt, stdout=out)
    text = out.getvalue().decode()
    return outcome.exit_status, json.loads(text) if fmt == "json" else text


def pool_size(event: dict[str, Any]) -> int:
    return int(event.get("kv_bytes") or 0) + int(event.get("k_bytes") or 0) + int(event.get("v_bytes") or 0)


def claimed_pools(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pools the log printed as allocated whose state the migration found to be an upper bound."""
    return [
        event
        for event in events
        if event["event"] in ("kv_pool.allocation", "kv_pool.unified_allocation")
        and event.get("allocation_state") == "va_upper_bound"
        and "allocation_state" in event["migrated"].get("inferred", {})
    ]


def test_the_pools_printed_as_allocated_that_were_upper_bounds_are_counted_per_run_and_rank() -> None:
    status, table = summarized(BEFORE_FIX)
    assert status == 0
    claimed = claimed_pools(migrated(BEFORE_FIX))
    assert claimed  # the log is the pre-fix wording: it printed reservations as allocated
    assert table["totals"]["printed_allocated_va_bytes"] == sum(map(pool_size, claimed))
    per_rank: dict[str, int] = {}
    for event in claimed:
        ranks = " ".join(f"{tag.upper()}{rank}" for tag, rank in sorted(event["ranks"].items()))
        per_rank[ranks] = per_rank.get(ranks, 0) + pool_size(event)
    by_rank: dict[str, int] = {}
    for row in table["runs"]:
        by_rank[row["ranks"]] = by_rank.get(row["ranks"], 0) + row["printed_allocated_va_bytes"]
    assert {k: v for k, v in by_rank.items() if v} == per_rank
    # no line of that release says what the pools committed: the overstatement is bounded, not claimed
    assert table["totals"]["overstated_bytes"] == 0
    assert table["totals"]["committed_unknown_bytes"] == table["totals"]["printed_allocated_va_bytes"]


def test_what_was_committed_of_a_claimed_pool_is_not_counted_as_overstated(tmp_path: Path) -> None:
    events = migrated(BEFORE_FIX)
    first = claimed_pools(events)[0]
    committed = pool_size(first) // 4
    first["committed_bytes"] = committed  # as a later kvlog or a corrected line would state it
    stated = tmp_path / "events.jsonl"
    stated.write_bytes(b"".join(orjson.dumps(event) + b"\n" for event in events))
    status, table = summarized(stated)
    assert status == 0
    row = next(r for r in table["runs"] if r["printed_allocated_va_bytes"] and r["overstated_bytes"])
    assert row["overstated_bytes"] == pool_size(first) - committed
    assert row["committed_kv_bytes"] >= committed


def test_the_three_formats_carry_the_same_figures(tmp_path: Path) -> None:
    inputs = sorted(CORPUS.glob("*.log"))
    _, document = summarized(*inputs)
    _, text = summarized(*inputs, fmt="csv")
    *rows, total = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == len(document["runs"]) == document["totals"]["runs"] == int(total["run"])
    assert total["source"] == "(total)"
    for column in ("reserved_va_bytes", "overstated_max_bytes", "unparsed_memory_lines"):
        assert int(total[column]) == document["totals"][column]
    for row, expected in zip(rows, document["runs"], strict=True):
        assert int(row["reserved_va_bytes"]) == expected["reserved_va_bytes"]
        assert row["ranks"] == expected["ranks"]
    for column in ("reserved_va_bytes", "committed_kv_bytes", "printed_allocated_va_bytes"):
        assert document["totals"][column] == sum(run[column] for run in document["runs"])
    unparsed = sum(run["unparsed_memory_lines"] for run in document["runs"]) + document["unparsed_outside_runs"]
    assert document["totals"]["unparsed_memory_lines"] == unparsed > 0  # the distractors log has some
    _, table = summarized(*inputs, fmt="text")
    claim = next(line for line in table.splitlines() if line.startswith("The logs printed "))
    unknown = document["totals"]["committed_unknown_bytes"]
    assert ("between" in claim) == (unknown > 0)  # an unknown part is a range, never a claim of 0 B
    lines = table.splitlines()
    rules = [index for index, line in enumerate(lines) if set(line) <= {"-", " "} and line]
    assert rules[1] - rules[0] - 1 == len(document["runs"])  # one line a run, between the rules
    assert lines[rules[1] + 1].split()[:2] == ["total", str(len(document["runs"]))]


def test_an_unparsed_memory_line_is_counted_in_the_run_and_rank_it_was_printed_in(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    text = BEFORE_FIX.read_text().splitlines()
    weird = "[2026-07-21 09:03:50 TP1] KV memory shuffled: 12.00 GB moved somewhere"
    log.write_text("\n".join([*text[:20], weird, *text[20:]]) + "\n")
    status, table = summarized(log)
    assert status == 0
    counted = [(row["ranks"], row["run"]) for row in table["runs"] if row["unparsed_memory_lines"]]
    assert counted == [("TP1", 1)]
    assert table["totals"]["unparsed_memory_lines"] == 1


def test_the_command_line_refuses_to_write_over_an_input_and_says_when_nothing_was_found(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(BEFORE_FIX.read_text())
    done = kvlog_text("summarize", log, "-o", log)
    assert done.returncode == 2
    assert done.stderr == f"kvlog summarize: -o {log} is the input {log}; it would be overwritten\n"
    assert log.read_text() == BEFORE_FIX.read_text()
    quiet = tmp_path / "quiet.log"
    quiet.write_text("nothing about memory\n")
    done = kvlog("summarize", quiet, "--format", "json")
    assert done.returncode == 1
    assert json.loads(done.stdout)["runs"] == []
    done = kvlog_text("summarize", tmp_path / "missing.log")
    assert done.returncode == 2
    assert "missing.log" in done.stderr
    assert "Traceback" not in done.stderr
    table = tmp_path / "fleet.csv"
    done = kvlog("summarize", log, "--format", "csv", "-o", table)
    assert done.returncode == 0
    assert table.read_text().startswith("source,ranks,run,start,reserved_va_bytes,")


def test_an_unparsed_line_of_a_rank_with_several_tags_finds_its_run(tmp_path: Path) -> None:
    """sglang prints ``DP1 TP1 EP1``; a timeline names the rank with its tags sorted."""
    log = tmp_path / "server.log"
    lines = (CORPUS / "gen2_2025.log").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if "DP1 TP1 EP1]" in line)
    weird = lines[at].split("]")[0] + "] KV memory shuffled: 12.00 GB moved somewhere"
    log.write_text("\n".join([*lines[: at + 1], weird, *lines[at + 1 :]]) + "\n")
    _, table = summarized(log)
    counted = [row["ranks"] for row in table["runs"] if row["unparsed_memory_lines"]]
    assert counted == ["DP1 EP1 TP1"]
    assert table["unparsed_outside_runs"] == 0


def test_the_other_engines_options_are_refused_before_a_table_is_written(tmp_path: Path) -> None:
    table = tmp_path / "fleet.txt"
    for engine, jobs, address in (("local", 1, "127.0.0.1:6379"), ("ray", 2, None)):
        with pytest.raises(OptionError):
            commands.summarize(BEFORE_FIX, output=table, engine=engine, jobs=jobs, ray_address=address)
        assert not table.exists()
    done = kvlog_text("summarize", BEFORE_FIX, "--ray-address", "127.0.0.1:6379")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "kvlog summarize: --ray-address names a Ray cluster: it needs --engine ray\n"


def test_the_table_read_a_group_of_sources_at_a_time_is_the_table_of_all_events_at_once(tmp_path: Path) -> None:
    """summarize holds one file's events at a time; a process's events across files stay one group, in order."""
    events = migrated(CORPUS / "gen2_2025.log")
    for event in events:  # kvlog's own events of one process, its log rotated into two files
        event.pop("migrated")
        event["pid"] = 7
    first, second = tmp_path / "process.1.jsonl", tmp_path / "process.2.jsonl"
    first.write_bytes(b"".join(orjson.dumps(event) + b"\n" for event in events[:15]))
    second.write_bytes(b"".join(orjson.dumps(event) + b"\n" for event in events[15:]))
    weird = tmp_path / "weird.log"
    lines = BEFORE_FIX.read_text().splitlines()
    weird.write_text("\n".join([*lines[:20], "[2026-07-21 09:03:50 TP1] KV memory shuffled: 12.00 GB", *lines[20:]]))
    stray = tmp_path / "stray.log"  # an unparsed line in a file without an event: outside any run
    stray.write_text("[2026-07-21 09:03:50 TP1] KV memory shuffled: 12.00 GB\n")
    inputs = [first, *sorted(CORPUS.glob("*.log")), weird, stray, second, BEFORE_FIX]
    out, dead = io.BytesIO(), tmp_path / "dead.jsonl"
    assert commands.migrate(inputs, only_events=True, stdout=out, dead_letter=dead).exit_status == 0
    everything = [orjson.loads(line) for line in out.getvalue().splitlines()]
    letters = [orjson.loads(line) for line in dead.read_bytes().splitlines()]
    whole = summarize_runs(timelines(everything), letters)
    assert whole.unparsed_outside_runs >= 1 and any(row.unparsed_memory_lines for row in whole.rows)
    assert sum(row.source == "(events of process 7)" for row in whole.rows) >= 1
    for fmt in ("text", "json", "csv"):
        status, table = summarized(*inputs, fmt=fmt)
        assert status == 0
        assert (json.dumps(table, indent=2) + "\n" if fmt == "json" else table) == render(whole, fmt), fmt


def with_invalid_copies(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``events`` and, after them, invalid copies of its first pool: kvlog migrate copies such events as they are."""
    pool = next(event for event in events if event["event"] == "kv_pool.allocation")
    return [*events, pool | {"pool": []}, pool | {"arena_ids": 7}, pool | {"ranks": {"tp": [0]}}]


def test_invalid_events_are_left_out_of_the_table_and_counted_not_crashed_on(tmp_path: Path) -> None:
    """A file of kvlog events may hold invalid ones: the table is the valid events', and stderr says how many not."""
    events = migrated(BEFORE_FIX)
    valid, mixed = tmp_path / "valid.jsonl", tmp_path / "mixed.jsonl"
    valid.write_bytes(b"".join(orjson.dumps(event) + b"\n" for event in events))
    mixed.write_bytes(b"".join(orjson.dumps(event) + b"\n" for event in with_invalid_copies(events)))
    expected = kvlog_text("summarize", valid)
    assert expected.returncode == 0, expected.stderr
    done = kvlog_text("summarize", mixed)
    assert (done.returncode, done.stdout) == (0, expected.stdout)
    assert done.stderr == "kvlog summarize: 3 invalid event(s) left out of the table (kvlog validate says why)\n"
    assert commands.summarize([str(mixed)], stdout=io.BytesIO()).invalid == 3
    assert commands.summarize([str(valid)], stdout=io.BytesIO()).invalid == 0


def test_weights_no_line_states_are_unknown_or_the_loads_drop_marked_inferred_never_zero(tmp_path: Path) -> None:
    """A load whose free memory before and after was printed: the drop, inferred; neither: unknown, not ``0 B``."""
    log = tmp_path / "old.log"
    log.write_text(
        "[2025-02-01 10:00:00 TP0] Load weight begin. avail mem=139.06 GB\n"
        "[2025-02-01 10:01:00 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=72.91 GB\n"
        "[2025-02-01 10:02:00 TP1] KV Cache is allocated. K size: 20.00 GB, V size: 20.00 GB.\n"
    )
    _, document = summarized(log)
    drop = round(139.06 * GIB) - round(72.91 * GIB)
    assert [(run["weights_bytes"], run["weights_inferred"]) for run in document["runs"]] == [
        (drop, True),
        (None, False),
    ]
    assert (document["totals"]["weights_bytes"], document["totals"]["weights_unknown_runs"]) == (drop, 1)
    _, text = summarized(log, fmt="text")
    tp0, tp1, total = (line for line in text.splitlines() if line.startswith((str(log), "total")))
    assert "66.1 GiB (inferred)" in tp0 and " unknown " in tp1 and "66.1 GiB + unknown (1 run(s))" in total
    _, table = summarized(log, fmt="csv")
    *rows, totals = csv.DictReader(io.StringIO(table))
    assert [row["weights_bytes"] for row in rows] == [str(drop), ""] and totals["weights_bytes"] == ""
