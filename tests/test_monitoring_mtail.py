"""Monitoring kept working, proven with the real mtail binary (``--one_shot``).

The pools: one rank pair (TP0, TP1) of a hybrid sliding-window server under post-capture sizing,
before sglang's wording fix (2026-08-03): two arenas per rank, SWA and Full sub-pools whose sizes are
VA upper bounds, the SWAKVPool summary, ``Memory pool end`` and two HiCache host pools. ``OLD_LOG``
is what sglang printed for them, among a few request lines; ``pools_of_rank`` gives the same pools as
kvlog events with exact byte counts, emitted for real through kvlog's pipeline (``kvlog.emit`` and
the typed constructors).

1. ``sglang_legacy.mtail`` (the old wording) gives the same metrics on ``OLD_LOG`` as on
   ``kvlog migrate --format legacy`` of the emitted events: exactly, since both print the same figures.
2. ``kvlog_events.mtail`` gives the same metrics on ``kvlog migrate`` of ``OLD_LOG`` as on the emitted
   events: same series and labels (allocation_state included), and values that agree within the
   precision the old log printed them with: a figure printed as ``4.05 GB`` (GiB) stands for any
   byte count within +-0.005 GiB of it, so the migrated and the exact value may differ by that much
   and no more (+-0.05 GiB for the arena's one decimal, +-0.005e9 bytes for host GB).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from cli_harness import kvlog as run_kvlog

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "monitoring"
LEGACY_PROGRAM = EXAMPLES / "sglang_legacy.mtail"
EVENTS_PROGRAM = EXAMPLES / "kvlog_events.mtail"
GIB = 1 << 30

OLD_LOG = Path(__file__).parent / "monitoring" / "old_post_capture_swa.log"

SWA_K = 4_349_493_248  # 4.0508 GiB, printed 4.05
FULL_K = 5_433_720_832  # 5.0606 GiB, printed 5.06


def pools_of_rank(tp: int) -> list[tuple[str, dict[str, object]]]:
    """The same pools as ``OLD_LOG``, as typed-constructor name and exact fields."""
    arena = {"backend": "cuda", "device": tp, "granularity_bytes": 2 << 20, "handle_type": None}
    pool = {
        "pool": "SWAKVPool",
        "layout": "mha",
        "dtype": "torch.bfloat16",
        "allocation_state": "va_upper_bound",
        "committed_bytes": None,
    }
    return [
        ("KvArenaReady", {**arena, "arena_id": "0", "reserved_va_bytes": 4711 * (2 << 20)}),  # 9.2010 GiB
        ("KvArenaReady", {**arena, "arena_id": "1", "reserved_va_bytes": 5735 * (2 << 20)}),  # 11.2012 GiB
        (
            "KvPoolAllocation",
            {
                **pool,
                "label": "SWA",
                "num_tokens": 1061120,
                "k_bytes": SWA_K,
                "v_bytes": SWA_K,
                "committed_bytes": None,
            },
        ),
        (
            "KvPoolAllocation",
            {
                **pool,
                "label": "Full",
                "num_tokens": 1326400,
                "k_bytes": FULL_K,
                "v_bytes": FULL_K,
                "committed_bytes": None,
            },
        ),
        (
            "KvPoolSwaSummary",
            {
                "allocation_state": "va_upper_bound",
                "total_bytes": 2 * (SWA_K + FULL_K),  # 18.2226 GiB, printed 18.22
                "swa_tokens": 1061120,
                "full_tokens": 1326400,
            },
        ),
        ("KvMemoryPoolEnd", {"avail_bytes": 80_863_084_544}),  # 75.3093 GiB
        ("KvHostPoolAllocation", {"label": "full", "num_tokens": 2652800, "host_bytes": 21_734_567_890}),
        ("KvHostPoolAllocation", {"label": "swa", "num_tokens": 1061120, "host_bytes": 4_338_002_944}),
    ]


EMITTER = """
import json, sys
import kvlog.events
from kvlog.emission import bind_ranks, configure, emit
configure(output="json", validation="raise", stream=sys.stdout)
for tp, pools in json.load(sys.stdin):
    bind_ranks(tp=tp)
    for constructor, fields in pools:
        emit(getattr(kvlog.events, constructor)(**fields))
"""

#: half-width of the interval each figure of OLD_LOG stands for, by metric of kvlog_events.mtail
PRINTED_PRECISION = {
    "kvlog_kv_pool_bytes": GIB * 0.005,
    "kvlog_kv_pool_swa_total_bytes": GIB * 0.005,
    "kvlog_kv_memory_pool_end_avail_bytes": GIB * 0.005,
    "kvlog_kv_arena_reserved_va_bytes": GIB * 0.05,
    "kvlog_kv_host_pool_bytes": 10**9 * 0.005,
    "kvlog_kv_events_total": 0,
}

Metrics = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def mtail() -> str:
    found = shutil.which("mtail")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("mtail is not installed, and CI must run the monitoring proofs (.ci/run installs it)")
        pytest.skip("mtail is not installed (apt-get install mtail)")
    return found


def run_mtail(mtail: str, program: Path, log: Path, tmp_path: Path) -> Metrics:
    """Every series mtail exports after reading ``log`` once with ``program``."""
    progs = Path(tempfile.mkdtemp(prefix=f"progs-{program.stem}-", dir=tmp_path))
    shutil.copy(program, progs)
    # Port 0: even in one-shot mode mtail binds its HTTP listener (3903 by default), and two test
    # workers running mtail at once would otherwise collide on it.
    listener = ["--port", "0", "--address", "127.0.0.1"]
    result = subprocess.run(
        [
            mtail,
            "--one_shot",
            "--one_shot_format=json",
            *listener,
            "--progs",
            str(progs),
            "--logs",
            str(log),
            "--logtostderr",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "compile failed" not in result.stderr and "Error occurred" not in result.stderr, result.stderr
    metrics: Metrics = {}
    for name, families in json.loads(result.stdout or "{}").items():
        for family in families:
            for series in family.get("LabelValues", []):
                labels = tuple(zip(family.get("Keys", []), series.get("Labels", []), strict=True))
                metrics[name, labels] = float(series["Value"]["Value"])
    return metrics


def kvlog(*args: str) -> bytes:
    result = run_kvlog(*args)
    assert result.returncode == 0, f"kvlog {' '.join(args)}: {result.stderr.decode()}"
    return result.stdout


@pytest.fixture(scope="module")
def emitted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pools' events, emitted for real through kvlog's pipeline in a fresh process."""
    path = tmp_path_factory.mktemp("emitted") / "emitted.jsonl"
    spec = json.dumps([[tp, pools_of_rank(tp)] for tp in (0, 1)])
    run = subprocess.run([sys.executable, "-c", EMITTER], input=spec, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    path.write_text(run.stdout)
    return path


@pytest.fixture(scope="module")
def logs(emitted: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The old log, the emitted events, and what kvlog migrate makes of them."""
    root = tmp_path_factory.mktemp("monitoring")
    paths = {"old": OLD_LOG, "emitted": emitted}
    for key, source, options in (
        ("legacy", emitted, ("--format", "legacy")),
        ("current_text", emitted, ("--format", "text")),
        ("migrated", OLD_LOG, ()),
        ("migrated_then_legacy", OLD_LOG, ("--format", "legacy")),
    ):
        paths[key] = root / f"{key}.log"
        paths[key].write_bytes(kvlog("migrate", str(source), *options))
    return paths


def test_emitted_events_are_the_pools(emitted: Path) -> None:
    events = [json.loads(line) for line in emitted.read_text().splitlines()]
    assert [(e["event"], e["ranks"]) for e in events] == [
        (name, {"tp": tp})
        for tp in (0, 1)
        for name in (
            ["kv_arena.ready"] * 2 + ["kv_pool.allocation"] * 2 + ["kv_pool.swa_summary", "kv_memory.pool_end"]
        )
        + ["kv_host_pool.allocation"] * 2
    ]


def test_legacy_program_same_metrics_on_old_log_and_on_legacy_rendering(
    mtail: str, logs: dict[str, Path], tmp_path: Path
) -> None:
    old = run_mtail(mtail, LEGACY_PROGRAM, logs["old"], tmp_path)
    rendered = run_mtail(mtail, LEGACY_PROGRAM, logs["legacy"], tmp_path)
    names = {name for name, _ in old}
    assert names == {
        "sglang_kv_cache_bytes",
        "sglang_kv_arena_reserved_bytes",
        "sglang_swa_kv_pool_mem_usage_bytes",
        "sglang_hicache_host_pool_bytes",
        "sglang_memory_pool_end_avail_bytes",
        "sglang_kv_cache_allocated_lines_total",
    }
    assert len(old) == 2 * (4 + 2 + 1 + 2 + 1 + 1)
    assert old[("sglang_kv_cache_bytes", (("ranks", "TP1"), ("label", "SWA"), ("buffer", "k")))] == 4.05 * GIB
    assert rendered == old


def test_legacy_program_same_metrics_on_old_log_and_on_its_own_round_trip(
    mtail: str, logs: dict[str, Path], tmp_path: Path
) -> None:
    """Old lines migrated and written back in the old wording feed the old parser the same figures."""
    old = run_mtail(mtail, LEGACY_PROGRAM, logs["old"], tmp_path)
    assert run_mtail(mtail, LEGACY_PROGRAM, logs["migrated_then_legacy"], tmp_path) == old


def test_legacy_program_is_blind_to_todays_wording(mtail: str, logs: dict[str, Path], tmp_path: Path) -> None:
    """Why --format legacy exists: the old program finds no arena and no SWA total in the truthful wording."""
    names = {name for name, _ in run_mtail(mtail, LEGACY_PROGRAM, logs["current_text"], tmp_path)}
    assert "sglang_kv_arena_reserved_bytes" not in names
    assert "sglang_swa_kv_pool_mem_usage_bytes" not in names


def test_events_program_same_metrics_on_migrated_old_log_and_on_emitted_events(
    mtail: str, logs: dict[str, Path], tmp_path: Path
) -> None:
    migrated = run_mtail(mtail, EVENTS_PROGRAM, logs["migrated"], tmp_path)
    emitted = run_mtail(mtail, EVENTS_PROGRAM, logs["emitted"], tmp_path)
    assert len(emitted) == 2 * (4 + 2 + 1 + 2 + 1) + 2 * 5
    assert sorted(migrated) == sorted(emitted)
    for key, exact in emitted.items():
        name, labels = key
        assert dict(labels).get("allocation_state", "va_upper_bound") == "va_upper_bound"
        tolerance = PRINTED_PRECISION[name]
        assert abs(migrated[key] - exact) <= tolerance, f"{key}: migrated {migrated[key]} vs emitted {exact}"
    sizes = [key for key in emitted if key[0] != "kvlog_kv_events_total"]
    assert any(migrated[key] != emitted[key] for key in sizes), "rounded figures cannot all be exact"


def test_only_events_keep_mtail_fed_past_invalid_utf8(mtail: str, logs: dict[str, Path], tmp_path: Path) -> None:
    """mtail stops reading a file at its first line that is not UTF-8, and real logs have such lines
    (tokenizer output). kvlog copies them byte for byte; with --only-events only events come out, in
    valid UTF-8, so both programs see every pool of a log that has one."""
    lines = logs["old"].read_bytes().splitlines(keepends=True)
    damaged = tmp_path / "damaged.log"
    damaged.write_bytes(
        b"".join([*lines[:3], b"[2026-08-03 14:00:40 TP0] Receive: text=\xff\xfe caf\xe9\n", *lines[3:]])
    )
    assert run_mtail(mtail, LEGACY_PROGRAM, damaged, tmp_path) != run_mtail(
        mtail, LEGACY_PROGRAM, logs["old"], tmp_path
    )
    for program, options, clean in (
        (LEGACY_PROGRAM, ("--format", "legacy", "--only-events"), logs["old"]),
        (EVENTS_PROGRAM, ("--only-events",), logs["migrated"]),
    ):
        fed = tmp_path / f"fed-{program.stem}.log"
        fed.write_bytes(kvlog("migrate", str(damaged), *options))
        assert run_mtail(mtail, program, fed, tmp_path) == run_mtail(mtail, program, clean, tmp_path)
