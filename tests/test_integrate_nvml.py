"""``kvlog integrate --nvml`` without a GPU: no NVML, no change; NVML's faults; the measured rule's arithmetic.

The measurements themselves are tested on a GPU (``tests/test_integrate_nvml_cuda.py``). Here NVML is
absent for real (CI has no nvidia-ml-py; where it is installed, it is hidden), and a fake ``pynvml``
stands in only for the driver errors no CPU machine can cause: NVML failing to start, and failing
mid-run after samples that worked.
"""

from __future__ import annotations

import io
import json
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from cli_harness import kvlog_text
from test_integrate_handler import START_UP, attached, decoded

from kvlog import commands
from kvlog.integrate.handler import _Measured, _Record, _settle
from kvlog.migration import load_chain
from kvlog.migration.engine import MigrateOptions, Migrator
from kvlog.nvml import MAX_LAG_S, DeviceSample, measured_state
from kvlog.schema.event_validator import EventValidator

GiB = 1 << 30
MiB = 1 << 20


def events_of(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, nvml: bool) -> list[dict[str, Any]]:
    """START_UP through a handler, its events without their timestamps and loggers (each run has its own)."""
    logger, handler, events = attached(tmp_path, nvml=nvml)
    try:
        for message in START_UP:
            logger.info(message)
    finally:
        handler.close()  # everything read and written, as at a log's end
        logger.removeHandler(handler)  # the next test's logger of the same name starts without it
    assert handler.dropped == 0
    assert events.exists()
    written = [{k: v for k, v in event.items() if k != "timestamp"} for event in decoded(events)]
    for event in written:
        event.get("ext", {}).pop("logger", None)
    return written


def test_without_nvidia_ml_py_the_events_are_those_of_a_handler_without_nvml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not importable, as in CI, whatever this machine has
    without = events_of(tmp_path / "without", monkeypatch, nvml=False)
    asked = events_of(tmp_path / "asked", monkeypatch, nvml=True)
    assert asked == without
    assert not any(event["event"] == "device_memory.measured" for event in asked)
    said = capsys.readouterr().err
    assert said.count("kvlog: no device measurements: nvidia-ml-py is not installed (the nvml extra)") == 1


class NVMLError(Exception):
    """pynvml's error class: what a failing driver call raises."""


def fake_nvml(*, init_fails: bool = False, samples_before_failing: int = 1 << 30) -> types.ModuleType:
    """A ``pynvml`` for the faults: one device, this process listed on it, until the driver fails."""
    calls = {"memory": 0}

    def init() -> None:
        if init_fails:
            raise NVMLError("Driver Not Loaded")

    def memory_info(_handle: object) -> types.SimpleNamespace:
        calls["memory"] += 1
        if calls["memory"] > samples_before_failing:
            raise NVMLError("Unknown Error")
        return types.SimpleNamespace(free=70 * GiB, total=80 * GiB, used=10 * GiB)

    def processes(_handle: object) -> list[types.SimpleNamespace]:
        import os  # noqa: PLC0415

        return [types.SimpleNamespace(pid=os.getpid(), usedGpuMemory=10 * GiB)]

    module = types.ModuleType("pynvml")
    functions: dict[str, Callable[..., Any]] = {
        "nvmlInit": init,
        "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: 1,
        "nvmlDeviceGetHandleByIndex": lambda index: ("device", index),
        "nvmlDeviceGetUUID": lambda _handle: "GPU-00000000-0000-0000-0000-000000000000",
        "nvmlDeviceGetMemoryInfo": memory_info,
        "nvmlDeviceGetComputeRunningProcesses": processes,
    }
    for name, function in functions.items():
        setattr(module, name, function)
    module.NVMLError = NVMLError  # type: ignore[attr-defined]
    return module


def test_nvml_failing_to_start_leaves_the_events_unchanged_and_says_why_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(init_fails=True))
    without = events_of(tmp_path / "without", monkeypatch, nvml=False)
    asked = events_of(tmp_path / "asked", monkeypatch, nvml=True)
    assert asked == without
    said = capsys.readouterr().err
    assert said.count("kvlog: no device measurements: NVML cannot start: NVMLError: Driver Not Loaded") == 1


def test_an_nvml_error_mid_run_stops_the_measurements_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(samples_before_failing=3))
    without = events_of(tmp_path / "without", monkeypatch, nvml=False)
    asked = events_of(tmp_path / "asked", monkeypatch, nvml=True)
    measured = [event for event in asked if event["event"] == "device_memory.measured"]
    assert [event for event in asked if event["event"] != "device_memory.measured"] == without
    assert [m["measured_line"] for m in measured] == [1, 2, 3]  # the three records sampled before the fault
    validator = EventValidator()
    for event in measured:
        assert validator.violations({**event, "timestamp": "2026-12-07T00:00:00Z"}) == []
    assert measured[0]["previous_line"] is None and measured[0]["process_used_delta_bytes"] is None
    assert measured[1]["previous_line"] == 1 and measured[1]["process_used_delta_bytes"] == 0
    pool = next(event for event in asked if event["event"] == "kv_pool.allocation")
    assert pool["migrated"]["inferred"]["allocation_state"]["rule"] == "arena-before-pool"  # evidence, not a claim
    said = capsys.readouterr().err
    assert said.count("kvlog: NVML failed: NVMLError: Unknown Error; this process's events are written") == 1


def sample(used: int | None, *, device_used: int = 20 * GiB, gpu: int = 0) -> DeviceSample:
    return DeviceSample(gpu, None, used, 80 * GiB - device_used, 80 * GiB, 0.0)


@pytest.mark.parametrize(
    ("stated", "before", "now", "state", "whose"),
    [
        # the process holds less than the pool: whatever the previous sample, no allocation of that size
        (16 * GiB, None, sample(700 * MiB), "va_upper_bound", "this process's used device memory is"),
        # NVML does not list the process: the device's figure includes it
        (32 * GiB, None, sample(None, device_used=20 * GiB), "va_upper_bound", "device memory in use on GPU 0"),
        # the process holds more than the pool, but rose by a reservation's first pages only
        (16 * GiB, sample(30 * GiB), sample(30 * GiB + 8 * MiB), "va_upper_bound", "rose by 8388608 bytes"),
        # rose by the pool's size
        (4 * GiB, sample(30 * GiB), sample(34 * GiB), "allocated", "rose by 4294967296 bytes"),
    ],
)
def test_the_measured_rule_tells_a_reservation_from_an_allocation(
    stated: int, before: DeviceSample | None, now: DeviceSample, state: str, whose: str
) -> None:
    verdict = measured_state(stated, 10_000_000, now, 0.001, before=before, before_lag_s=0.001)
    assert verdict is not None
    assert verdict.state == state
    assert whose in verdict.evidence


@pytest.mark.parametrize(
    ("before", "now", "now_lag_s", "before_lag_s"),
    [
        (None, sample(30 * GiB), 0.001, 0.0),  # held more than the pool, and no previous sample
        (sample(30 * GiB), sample(32 * GiB), 0.001, 0.001),  # rose by half the pool: could be either
        (sample(30 * GiB), sample(30 * GiB), MAX_LAG_S * 2, 0.001),  # sampled too long after the line
        (sample(30 * GiB), sample(30 * GiB), 0.001, MAX_LAG_S * 2),  # the previous one too long after its own
        (sample(30 * GiB, gpu=1), sample(30 * GiB), 0.001, 0.001),  # another device
    ],
)
def test_the_measured_rule_says_nothing_where_the_figures_cannot_tell(
    before: DeviceSample | None, now: DeviceSample, now_lag_s: float, before_lag_s: float
) -> None:
    assert measured_state(4 * GiB, 10_000_000, now, now_lag_s, before=before, before_lag_s=before_lag_s) is None


def test_integrate_nvml_asks_each_process_to_sample(tmp_path: Path) -> None:
    done = kvlog_text("integrate", "sglang", "--nvml", "--events", str(tmp_path / "kv.jsonl"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["handlers"]["kvlog"]["nvml"] is True
    assert "nvml" not in commands.integrate("sglang", events="-")["handlers"]["kvlog"]


#: each pool wording whose line claims allocated of what may be a reservation, with nothing before it to settle it
CLAIMS = {
    "kv_pool.allocation": (
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1048576, K size: 8.00 GB, V size: 8.00 GB"
    ),
    "kv_pool.unified_allocation": (
        "[unified-memory-pool] UnifiedKVPool allocated: total_bytes=16.00 GB (=17179869184 B), 2 sub-pool(s)"
    ),
    "kv_pool.swa_summary": "SWAKVPool mem usage: 16.00 GB, swa size: 200000, full size: 800000",
}


def claimed(line: str) -> dict[str, Any]:
    """The event ``kvlog migrate`` reads from ``line`` alone: its state only the line's claim."""
    out = io.BytesIO()
    Migrator(load_chain(), MigrateOptions(only_events=True)).migrate(None, io.BytesIO(f"{line}\n".encode()), out)
    (event,) = [orjson.loads(row) for row in out.getvalue().splitlines()]
    assert event["allocation_state"] == "allocated"
    assert event["migrated"]["inferred"]["allocation_state"]["rule"].endswith("claims-allocated")
    return event


def measured(used: int, *, previous: int | None = None) -> _Measured:
    record = _Record(0.0, "", "sglang", "", 0, None, "", 0)
    before = None if previous is None else _Measured(sample(previous), 1, record, None)
    return _Measured(sample(used), 2, record, before)


@pytest.mark.parametrize("name", sorted(CLAIMS))
def test_every_pool_whose_line_only_claims_allocated_is_a_va_bound_where_the_process_holds_less(name: str) -> None:
    event = claimed(CLAIMS[name])
    _settle(event, measured(700 * MiB), 2)
    assert event["event"] == name
    assert event["allocation_state"] == "va_upper_bound"
    assert event["migrated"]["inferred"]["allocation_state"]["rule"] == "measured"
    assert event["migrated"]["inferred"]["allocation_state"]["evidence_line"] == 2


@pytest.mark.parametrize("name", sorted(CLAIMS))
def test_only_a_pools_own_line_is_judged_by_the_rise_since_the_previous_record(name: str) -> None:
    """A summary or a unified pool is logged after its sub-pools' lines: no rise since them tells anything."""
    event = claimed(CLAIMS[name])
    _settle(event, measured(30 * GiB + 8 * MiB, previous=30 * GiB), 2)
    if name == "kv_pool.allocation":
        assert event["allocation_state"] == "va_upper_bound"
        assert event["migrated"]["inferred"]["allocation_state"]["evidence_line"] == 1
    else:
        assert event["allocation_state"] == "allocated"
        assert event["migrated"]["inferred"]["allocation_state"]["rule"].endswith("claims-allocated")


def test_a_state_another_line_told_is_never_changed_by_a_measurement() -> None:
    out = io.BytesIO()
    log = "\n".join(START_UP[:4]) + "\n"  # the arena line before the pool: arena-before-pool
    Migrator(load_chain(), MigrateOptions(only_events=True)).migrate(None, io.BytesIO(log.encode()), out)
    pool = next(e for e in map(orjson.loads, out.getvalue().splitlines()) if e["event"] == "kv_pool.allocation")
    before = json.dumps(pool, sort_keys=True)
    _settle(pool, measured(40 * GiB, previous=40 * GiB - 8 * MiB), 4)  # whatever the figures would say
    assert json.dumps(pool, sort_keys=True) == before
