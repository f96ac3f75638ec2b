"""vLLM's logs through ``kvlog migrate``: what a user migrating a vLLM server's log relies on.

Small logs written the way vLLM writes them (each era's prefix, ranks and pids, no year), migrated by
the library call ``kvlog.commands.migrate`` and once by the real command where the console is the contract.
"""

from __future__ import annotations

import io
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cli_harness import kvlog

from kvlog.commands import migrate

GIB = 1 << 30


def _run(tmp_path: Path, text: str, *, year: int | None = None, **options: Any) -> tuple[list[dict[str, Any]], Any]:
    """Migrate ``text`` as a file (modified in ``year`` when given): the events written, and the outcome."""
    log = tmp_path / "vllm.log"
    log.write_text(text)
    if year is not None:
        stamp = datetime(year, 7, 1, 12, tzinfo=UTC).timestamp()
        os.utime(log, (stamp, stamp))
    out = io.BytesIO()
    outcome = migrate([log], stdout=out, **options)
    events = [json.loads(line) for line in out.getvalue().splitlines() if line.startswith(b'{"event"')]
    return events, outcome


@pytest.mark.parametrize(
    ("prefix", "ranks", "pid", "level"),
    [
        ("INFO 06-01 10:00:05 llm_engine.py:123] ", None, None, "info"),
        ("INFO 06-01 10:00:05 [kv_cache_utils.py:123] ", None, None, "info"),
        ("(VllmWorker rank=3 pid=12) INFO 06-01 10:00:05 [gpu_worker.py:123] ", {"rank": 3}, 12, "info"),
        ("(EngineCore_DP1 pid=12) WARNING 06-01 10:00:05 [v1/worker/gpu_worker.py:276] ", {"dp": 1}, 12, "warning"),
    ],
)
def test_every_prefix_era_gives_the_line_its_ranks_pid_and_level(
    tmp_path: Path, prefix: str, ranks: dict[str, int] | None, pid: int | None, level: str
) -> None:
    events, outcome = _run(tmp_path, f"{prefix}# GPU blocks: 2048, # CPU blocks: 512\n", year=2024)
    assert outcome.exit_status == 0
    [event] = events
    assert event["event"] == "kv_pool.capacity"
    assert (event["num_gpu_blocks"], event["num_cpu_blocks"], event["num_tokens"]) == (2048, 512, None)
    assert event.get("ranks") == ranks
    assert event.get("pid") == pid
    assert event["level"] == level
    assert event["timestamp"] == "2024-06-01T10:00:05Z"


def test_the_year_comes_from_the_files_modification_time(tmp_path: Path) -> None:
    """The file changed on 2025-07-01: a June line is of 2025, a November line of 2024 (a log never runs ahead)."""
    june = "(EngineCore_DP0 pid=7) INFO 06-30 23:59:58 [gpu_worker.py:123] Available KV cache memory: 61.50 GiB\n"
    november = "(EngineCore_DP0 pid=7) INFO 11-30 23:59:58 [gpu_worker.py:123] Available KV cache memory: 61.50 GiB\n"
    [early, late], _ = _run(tmp_path, june + november, year=2025)
    assert (early["timestamp"], late["timestamp"]) == ("2025-06-30T23:59:58Z", "2024-11-30T23:59:58Z")
    inferred = early["migrated"]["inferred"]["timestamp"]
    assert inferred["rule"] == "date-not-on-line"
    assert "2025-07-01" in inferred["evidence"]


def test_the_three_line_memory_profile_of_vllm_0_6_5_to_0_10(tmp_path: Path) -> None:
    prefix = "INFO 12-20 10:00:06 worker.py:265] "
    text = (
        f"{prefix}Memory profiling takes 5.21 seconds\n"
        f"{prefix}the current vLLM instance can use total_gpu_memory (79.19GiB) x gpu_memory_utilization (0.90)"
        " = 71.27GiB\n"
        f"{prefix}model weights take 14.99GiB; non_torch_memory takes 0.13GiB; PyTorch activation peak memory"
        " takes 1.20GiB; the rest of the memory reserved for KV Cache is 54.95GiB.\n"
    )
    [budget, usage], outcome = _run(tmp_path, text, strict=True)
    assert outcome.exit_status == 0 and outcome.report.companions["note"] == 1
    assert (budget["total_bytes"], budget["gpu_memory_utilization"], budget["budget_bytes"]) == (
        round(79.19 * GIB),
        0.9,
        round(71.27 * GIB),
    )
    assert (usage["weights_bytes"], usage["kv_cache_bytes"]) == (round(14.99 * GIB), round(54.95 * GIB))


def test_with_no_file_date_the_wordings_release_window_tells_the_year_and_says_so() -> None:
    """Issue 32: a stdin line with no file date takes the first year its wording's releases printed it in."""
    line = b"INFO 06-01 10:00:05 [gpu_worker.py:123] Available KV cache memory: 61.5 GiB\n"
    done = kvlog("migrate", "--only-events", "-", stdin=line)
    assert done.returncode == 0, done.stderr
    event = json.loads(done.stdout)
    assert event["timestamp"] == "2025-06-01T10:00:05Z"  # first printed after 0.9.0.1 (2025-05-30)
    inferred = event["migrated"]["inferred"]["timestamp"]
    assert inferred["rule"] == "wording-release"
    assert "2025-05-30" in inferred["evidence"]
    assert b"(none 1)" not in done.stderr and b"vllm 1" in done.stderr  # the server, named in the summary


def test_format_gib_figures_carry_the_roundings_uncertainty_whatever_the_decimals(tmp_path: Path) -> None:
    text = "".join(
        f"INFO 06-01 10:00:0{n} [gpu_worker.py:123] Available KV cache memory: {figure} GiB\n"
        for n, figure in enumerate(("61.5", "0.0", "12.34"))
    )
    events, _ = _run(tmp_path, text, year=2026)
    assert [e["available_bytes"] for e in events] == [round(61.5 * GIB), 0, round(12.34 * GIB)]
    assert [e["migrated"]["uncertainty_bytes"]["available_bytes"] for e in events] == [5368710] * 3


def test_grouped_numbers_read_with_or_without_separators(tmp_path: Path) -> None:
    text = (
        "(EngineCore_DP0 pid=1) INFO 06-01 10:00:05 [kv_cache_utils.py:1] GPU KV cache size: 1,234,567 tokens\n"
        "(EngineCore_DP0 pid=1) INFO 06-01 10:00:05 [kv_cache_utils.py:1] "
        "Maximum concurrency for 32,768 tokens per request: 37.68x\n"
        "INFO 06-01 10:00:05 [kv_cache_utils.py:1] GPU KV cache size: 812345 tokens\n"
        "(EngineCore_DP0 pid=1) INFO 06-01 10:00:05 [kv_cache_utils.py:1] XPU KV cache size: 1,024 tokens, "
        "Maximum concurrency for 131,072 tokens per request: 1.00x\n"
    )
    events, outcome = _run(tmp_path, text, year=2026)
    assert outcome.exit_status == 0
    assert [(e["device"], e["num_tokens"], e["max_model_len"], e["max_concurrency"]) for e in events] == [
        ("GPU", 1234567, None, None),
        (None, None, 32768, 37.68),
        ("GPU", 812345, None, None),
        ("XPU", 1024, 131072, 1.0),
    ]


def test_continuation_lines_repeat_the_prefix_and_are_each_read(tmp_path: Path) -> None:
    """vLLM prints every line of a multi-line message with the prefix: each is a line of its own."""
    head = "(EngineCore_DP0 pid=12) INFO 06-01 10:00:05 [core.py:88] "
    text = (
        f"{head}init engine (profile, create kv cache, warmup model) took 41.20 seconds, summary:\n"
        f"{head}GPU KV cache size: 1,234,567 tokens\n"
        f"{head}Maximum concurrency for 32,768 tokens per request: 37.68x\n"
    )
    events, outcome = _run(tmp_path, text, year=2025, strict=True)
    assert outcome.exit_status == 0
    assert [(e["event"], e["migrated"]["line"], e["pid"], e["ranks"]) for e in events] == [
        ("kv_pool.capacity", 2, 12, {"dp": 0}),
        ("kv_pool.capacity", 3, 12, {"dp": 0}),
    ]


_ENGINE = "(EngineCore_DP0 pid=2390) INFO 06-01 "
_API = "(APIServer pid=2301) INFO 06-01 "
STARTUP = "".join(
    f"{line}\n"
    for line in (
        _ENGINE + "10:00:01 [core.py:69] Initializing a V1 LLM engine (v0.9.0) with config: "
        "model='meta-llama/Llama-3.1-8B-Instruct'",
        _ENGINE + "10:00:03 [gpu_model_runner.py:1900] Starting to load model meta-llama/Llama-3.1-8B-Instruct...",
        _ENGINE + "10:00:09 [gpu_model_runner.py:1932] Model loading took 14.9935 GiB memory and 5.412345 seconds",
        _ENGINE + "10:00:15 [gpu_worker.py:276] Available KV cache memory: 56.22 GiB",
        _ENGINE + "10:00:15 [kv_cache_utils.py:849] GPU KV cache size: 460,544 tokens",
        _ENGINE + "10:00:15 [kv_cache_utils.py:853] Maximum concurrency for 131,072 tokens per request: 3.51x",
        _ENGINE + "10:00:37 [gpu_model_runner.py:2567] Graph capturing finished in 22 secs, took 0.41 GiB",
        _ENGINE + "10:00:37 [core.py:210] init engine (profile, create kv cache, warmup model) took 28.30 seconds",
        _API + "10:00:38 [api_server.py:1800] Starting vLLM API server 0 on http://0.0.0.0:8000",
        _API + "10:01:02 [loggers.py:123] Engine 000: Avg prompt throughput: 12.3 tokens/s, "
        "Avg generation throughput: 45.6 tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
        "GPU KV cache usage: 0.1%, Prefix cache hit rate: 0.0%",
        _ENGINE + "10:02:00 [cumem.py:250] CuMemAllocator: sleep freed 70.12 GiB memory in total, "
        "of which 14.99 GiB is backed up in CPU and the rest 55.13 GiB is discarded directly.",
        _ENGINE + "10:02:00 [gpu_worker.py:110] Sleep mode freed 70.12 GiB memory, 1.05 GiB memory is still in use.",
    )
)


def test_a_realistic_startup_log_migrates_strictly(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    events, outcome = _run(tmp_path, STARTUP, year=2025, strict=True, report=report)
    assert outcome.exit_status == 0, outcome.status_line
    assert [e["event"] for e in events] == [
        "weights.load_end",
        "kv_pool.memory_available",
        "kv_pool.capacity",
        "kv_pool.capacity",
        "cuda_graph.captured",
        "memory.sleep",
        "memory.sleep",
    ]
    load, available, _, _, graphs, allocator, sleep = events
    assert (load["mem_usage_bytes"], load["elapsed_s"], load["avail_bytes"]) == (16099148038, 5.412345, None)
    assert load["schema_version"] == 2
    assert available["available_bytes"] == round(56.22 * GIB)
    assert (graphs["elapsed_s"], graphs["mem_usage_bytes"]) == (22.0, round(0.41 * GIB))
    assert (allocator["offloaded_bytes"], allocator["discarded_bytes"]) == (round(14.99 * GIB), round(55.13 * GIB))
    assert (sleep["freed_bytes"], sleep["in_use_bytes"]) == (round(70.12 * GIB), round(1.05 * GIB))
    assert all(e["timestamp"].startswith("2025-06-01T") and e["pid"] == 2390 for e in events)
    written = json.loads(report.read_text())
    assert written["files_by_server"] == {"vllm": 1}
    assert written["unparsed_memory_lines"] == 0


def test_an_unknown_memory_line_fails_strict(tmp_path: Path) -> None:
    text = STARTUP + "(EngineCore_DP0 pid=2390) INFO 06-01 10:03:00 [gpu_worker.py:99] Weird new pool holds 3.25 GiB\n"
    dead = tmp_path / "dead.jsonl"
    events, outcome = _run(tmp_path, text, year=2025, strict=True, dead_letter=dead)
    assert outcome.exit_status == 1
    assert len(events) == 7  # everything else was still migrated
    [letter] = [json.loads(line) for line in dead.read_text().splitlines()]
    assert "Weird new pool holds 3.25 GiB" in letter["text"]
    assert "vllm" in letter["reason"]


def test_the_server_is_detected_per_file_and_source_forces_it(tmp_path: Path) -> None:
    vllm_line = "INFO 06-01 10:00:05 [gpu_worker.py:1] Available KV cache memory: 61.5 GiB\n"
    sglang_line = "[2026-06-01 10:00:05 TP0] Memory pool end. avail mem=12.35 GB\n"
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "vllm.log").write_text(vllm_line)
    (tmp_path / "a" / "sglang.log").write_text(sglang_line)
    (tmp_path / "a" / "other.log").write_text("nothing to read\n")
    detected = migrate([tmp_path / "a"], output=tmp_path / "out", strict=True)
    assert detected.exit_status == 0
    assert dict(detected.report.servers) == {"none": 1, "sglang": 1, "vllm": 1}
    events, forced = _run(tmp_path, vllm_line, source="sglang", strict=True)
    assert (events, forced.exit_status, forced.report.unparsed_memory_lines) == ([], 1, 1)
    events, forced = _run(tmp_path, vllm_line, source="vllm", strict=True)
    assert [e["event"] for e in events] == ["kv_pool.memory_available"] and forced.exit_status == 0


@pytest.mark.parametrize(
    "line",
    [
        # found by the construction proof: a figure no JSON number holds, and a sign where the schema has none
        b"INFO 06-01 10:00:05 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s,"
        b" GPU KV cache usage: 1e400%\n",
        b"INFO 06-01 10:00:05 [hpu_worker.py:123] Free device memory: 0 KiB, 0 KiB usable (gpu_memory_utilization=0.9),"
        b" 0 KiB reserved for HPUGraphs (VLLM_GRAPH_RESERVED_MEM=0.1), -1 KiB reserved for KV cache\n",
    ],
)
def test_a_figure_its_schema_cannot_hold_makes_no_event_and_the_line_is_kept(line: bytes, tmp_path: Path) -> None:
    dead = tmp_path / "dead.jsonl"
    done = kvlog("migrate", "--usage", "all", "--dead-letter", dead, "-", stdin=line)
    assert done.returncode == 0, done.stderr
    assert done.stdout == line, "passed through as it was"
    # the wording does not read it: no event was built for the validator to refuse
    reasons = [json.loads(entry)["reason"] for entry in dead.read_text().splitlines()] if dead.exists() else []
    assert not [reason for reason in reasons if "is invalid" in reason]
