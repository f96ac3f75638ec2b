"""The ledger's gauges (``kvlog_device_memory_bytes{consumer}`` ...) are ``kvlog ledger``'s rows, as records arrive.

In-process: real logs migrated, real events fed to ``MemorySeries`` as ``kvlog follow`` and ``kvlog integrate``
feed it, compared with ``kvlog.commands.ledger`` of the same input; the follower and the live handler with
their real endpoints. The rules over these gauges run in promtool (``examples/monitoring``,
``tests/test_monitoring_prometheus_rules.py``).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from follow_helpers import following, wait_for
from test_integrate_handler import START_UP, attached
from test_ledger import GIB, SGLANG_18263, VLLM_14447, current, own_events
from test_monitoring_prometheus import scraped

from kvlog import commands
from kvlog.ledger import CONSUMERS
from kvlog.metrics import Device, LedgerFigures, MemorySeries, process_device
from kvlog.metrics.ledger import CONSUMER_LABELS
from kvlog.metrics.series import Metric

Gauges = dict[tuple[str, tuple[tuple[str, str], ...]], float]
UUID = "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"
#: a ledger figure's JSON name -> its gauge (consumers are kvlog_device_memory_bytes{consumer})
OWN = {
    "device_total_bytes": "kvlog_device_total_bytes",
    "free_bytes": "kvlog_device_free_bytes",
    "unaccounted_bytes": "kvlog_device_unaccounted_bytes",
    "kv_va_upper_bound_bytes": "kvlog_kv_va_upper_bound_bytes",
}


def migrated(path: Path) -> list[dict[str, Any]]:
    out = io.BytesIO()
    commands.migrate(str(path), only_events=True, stdout=out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def fed(events: list[dict[str, Any]], *, series: MemorySeries | None = None, instance: str = "a.log") -> MemorySeries:
    series = series if series is not None else MemorySeries(ledger=LedgerFigures())
    for event in events:
        series.observe(event, instance=instance)
    return series


def gauges(series: MemorySeries) -> Gauges:
    """The ledger's series: (metric, labels less the scope's) -> value."""
    scope = {"server", "server_instance", "tp", "dp", "pp", "ep", "other_ranks"}
    return {
        (metric.name, tuple(sorted((k, v) for k, v in labels.items() if k not in scope))): value
        for metric, labels, value in series.samples()
        if metric.name.startswith(("kvlog_device_", "kvlog_kv_va_upper_bound"))
    }


def from_ledger(row: dict[str, Any]) -> Gauges:
    """The gauges a ledger row (``kvlog ledger --format json``) says a rank's run should have."""
    want: Gauges = {}
    figures = {**row["consumers"], "kv_committed_bytes": row["kv_committed_bytes"]}
    for name, value in figures.items():
        if value is not None:
            figure = name.removesuffix("_bytes")
            want[("kvlog_device_memory_bytes", (("consumer", figure),))] = value
            want[("kvlog_device_memory_uncertainty_bytes", (("figure", figure),))] = row["uncertainty_bytes"][name]
    for name, metric in OWN.items():
        if row[name] is not None:
            want[(metric, ())] = row[name]
            want[("kvlog_device_memory_uncertainty_bytes", (("figure", name.removesuffix("_bytes")),))] = row[
                "uncertainty_bytes"
            ][name]
    return want


def ledger_rows(path: Path) -> list[dict[str, Any]]:
    out = io.BytesIO()
    commands.ledger(str(path), output_format="json", stdout=out)
    rows: list[dict[str, Any]] = json.loads(out.getvalue())["rows"]
    return rows


def without_ceiling(found: Gauges) -> Gauges:
    """The ceiling is the ledger's flag input, not a JSON figure: compared on its own."""
    return {
        key: value for key, value in found.items() if "ceiling" not in key[0] and ("figure", "ceiling") not in key[1]
    }


@pytest.mark.parametrize("text", [SGLANG_18263, VLLM_14447], ids=["sglang-18263", "vllm-14447"])
def test_the_gauges_are_kvlog_ledger_s_figures_of_the_same_log(tmp_path: Path, text: str) -> None:
    path = tmp_path / "server.log"
    path.write_text(text)
    [row] = ledger_rows(path)
    assert without_ceiling(gauges(fed(migrated(path)))) == from_ledger(row)


def test_a_consumer_no_line_states_has_no_series_never_0(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_text(SGLANG_18263)  # weights, a pool, the pool's end: no total, no graph, no profile
    found = gauges(fed(migrated(path)))
    held = {dict(labels)["consumer"] for name, labels in found if name == "kvlog_device_memory_bytes"}
    assert held == {"weights", "kv_committed"}
    unstated = {"non_torch", "activation_peak", "runtime", "cuda_graph", "aux_buffers", "mamba_pool"}
    assert set(CONSUMERS) - held == unstated
    assert ("kvlog_device_unaccounted_bytes", ()) not in found  # sglang prints no device total
    assert ("kvlog_device_total_bytes", ()) not in found
    assert all(value != 0 for (name, _), value in found.items() if name != "kvlog_device_memory_uncertainty_bytes")


def test_the_gauges_move_as_records_arrive_and_a_restart_drops_the_run_s(tmp_path: Path) -> None:
    lines = [
        current("weights.load_begin", avail_bytes=80 * GIB),
        current("memory.profile_budget", total_bytes=80 * GIB, gpu_memory_utilization=0.9, budget_bytes=72 * GIB),
        current("weights.load_end", mem_usage_bytes=15 * GIB),
        current("kv_pool.allocation", layout="mha", k_bytes=25 * GIB, v_bytes=25 * GIB, allocation_state="allocated"),
        current("kv_memory.pool_end", avail_bytes=10 * GIB),
        current("cuda_graph.captured", mem_usage_bytes=2 * GIB, avail_bytes=7 * GIB),
    ]
    events = [json.loads(line) for line in lines]
    series = fed(events[:3])
    assert gauges(series)[("kvlog_device_memory_bytes", (("consumer", "weights"),))] == 15 * GIB
    assert ("kvlog_device_unaccounted_bytes", ()) not in gauges(series)  # no free memory measured yet
    fed(events[3:5], series=series)
    assert gauges(series)[("kvlog_device_unaccounted_bytes", ())] == (80 - 15 - 50 - 10) * GIB
    fed(events[5:], series=series)  # the capture's graphs and the free memory after it: 1 GiB no line names
    assert gauges(series)[("kvlog_device_unaccounted_bytes", ())] == (80 - 15 - 50 - 2 - 7) * GIB
    assert gauges(series)[("kvlog_device_free_bytes", ())] == 7 * GIB
    [row] = ledger_rows(own_events(tmp_path, *lines))
    assert without_ceiling(gauges(series)) == from_ledger(row)
    fed(events[:1], series=series)  # the rank starts again: its run's figures go, but what the new run states
    assert gauges(series) == {
        ("kvlog_device_memory_ceiling_bytes", ()): 80 * GIB,
        ("kvlog_device_memory_uncertainty_bytes", (("figure", "ceiling"),)): 0,
    }


def test_the_kv_address_space_is_its_own_series_never_a_consumer_of_memory(tmp_path: Path) -> None:
    path = Path(__file__).resolve().parent / "corpus" / "postcapture_before_fix_2026_07.log"
    found = gauges(fed(migrated(path)))  # the last run of TP0: its pools reserved 9.1 GiB, 0.5 GiB of it committed
    assert found[("kvlog_kv_va_upper_bound_bytes", ())] == 9792525436
    held = {dict(labels)["consumer"]: value for (name, labels), value in found.items() if "memory_bytes" in name}
    assert held == {"kv_committed": 536870912}
    assert found[("kvlog_device_memory_ceiling_bytes", ())] == round(139.06 * GIB)


def test_a_runtime_that_commits_all_day_keeps_one_event_an_arena_and_the_same_figures(tmp_path: Path) -> None:
    """The memory runtime emits a ``kv_arena.commit`` per growth: the ledger keeps the last of a row, per arena."""

    def commit(arena: str, committed: int) -> str:
        return current(
            "kv_arena.commit", arena_id=arena, range_count=1, offset_bytes=0, nbytes=2 << 20,
            committed_bytes=committed, duration_us=3.0,
        )  # fmt: skip

    lines = [
        current("weights.load_begin", avail_bytes=80 * GIB),
        current("memory.profile_budget", total_bytes=80 * GIB, gpu_memory_utilization=0.9, budget_bytes=72 * GIB),
        current(
            "kv_arena.ready",
            arena_id="0",
            backend="cuda",
            device=None,  # no device: the figures compared are the ledger JSON's, which has no labels
            reserved_va_bytes=60 * GIB,
            granularity_bytes=2 << 20,
        ),
        *(commit("0", n * (2 << 20)) for n in range(1, 401)),
        commit("1", 2 << 20),  # another arena between: the first arena's next commit is kept beside it
        *(commit("0", n * (2 << 20)) for n in range(401, 801)),
        current("kv_memory.pool_end", avail_bytes=10 * GIB),
    ]
    ledger = Counting()
    events = [json.loads(line) for line in lines]
    kept = [events[0]]
    for event in events[1:]:
        kept[-1:] = [kept[-1], event][ledger.supersedes(event, kept[-1]) :]
    assert [event["event"] for event in kept] == [
        "weights.load_begin", "memory.profile_budget", "kv_arena.ready",
        "kv_arena.commit", "kv_arena.commit", "kv_arena.commit", "kv_memory.pool_end",
    ]  # fmt: skip
    [row] = ledger_rows(own_events(tmp_path, *lines))
    assert row["kv_committed_bytes"] == (800 + 1) * (2 << 20)
    assert without_ceiling(gauges(fed(events, series=MemorySeries(ledger=ledger)))) == from_ledger(row)
    assert ledger.read == len(kept), "the series keeps what supersedes leaves, not every commit"


class Counting(LedgerFigures):
    """The ledger, counting the events a run hands it."""

    read = 0

    def figures(self, events: Sequence[Mapping[str, Any]]) -> list[tuple[Metric, tuple[str, ...], float]]:
        self.read = len(events)
        return super().figures(events)


def test_consumer_labels_are_the_table_s_whatever_the_log_says() -> None:
    assert (*CONSUMERS, "kv_committed") == CONSUMER_LABELS


def test_ranks_beyond_the_bound_have_no_ledger_and_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "tp.log"
    path.write_text(
        "".join(f"[2025-10-16 09:06:22 TP{rank}] Memory pool end. avail mem=11.87 GB\n" for rank in range(3))
    )
    series = fed(migrated(path), series=MemorySeries(label_values=2, ledger=LedgerFigures()))
    samples = series.samples()
    free = {labels["tp"] for metric, labels, _ in samples if metric.name == "kvlog_device_free_bytes"}
    assert free == {"0", "1"}
    folded = {
        labels["label_name"]: value for metric, labels, value in samples if metric.name == "kvlog_series_folded_total"
    }
    assert folded["ranks"] == 1
    stages = {labels["tp"] for metric, labels, _ in samples if metric.name == "kvlog_memory_avail_bytes"}
    assert stages == {"0", "1", "2"}, "the bound is the ledger's: the other gauges keep every rank"


def test_without_a_ledger_there_are_no_ledger_series_nor_a_ranks_counter(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_text(SGLANG_18263)
    series = fed(migrated(path), series=MemorySeries())
    assert gauges(series) == {}
    assert all(labels.get("label_name") != "ranks" for _, labels, _ in series.samples())


def test_the_device_a_line_names_and_the_one_the_live_process_knows_are_dcgm_s_labels() -> None:
    arena = current(
        "kv_arena.ready", arena_id="0", backend="cuda", device=3, reserved_va_bytes=GIB, granularity_bytes=2 << 20
    )
    pool_end = current("kv_memory.pool_end", avail_bytes=10 * GIB)
    old = json.loads(current("kv_memory.pool_end", avail_bytes=10 * GIB)) | {"ranks": {"gpu": 1}}  # [gpu_id=1]
    series = fed([json.loads(arena), json.loads(pool_end), old])
    devices = {
        (labels.get("tp"), labels.get("gpu"), labels.get("UUID"))
        for metric, labels, _ in series.samples()
        if metric.name == "kvlog_device_free_bytes"
    }
    assert devices == {("0", "3", None), (None, "1", None)}
    live = MemorySeries(ledger=LedgerFigures())
    live.add_instance("host:7", device=Device(uuid=UUID))
    fed([json.loads(pool_end)], series=live, instance="host:7")
    [(labels, value)] = [
        (labels, v) for metric, labels, v in live.samples() if metric.name == "kvlog_device_free_bytes"
    ]
    assert (labels["UUID"], "gpu" in labels, value) == (UUID, False, 10 * GIB)


def test_the_driver_s_word_names_the_device_and_measures_its_total_and_free_memory() -> None:
    """``kvlog integrate --nvml``: NVML's index and UUID label the rank's ledger, whatever the environment said."""
    pool_end = json.loads(current("kv_memory.pool_end", avail_bytes=10 * GIB))
    measured = json.loads(
        current(
            "device_memory.measured",
            source="nvml",
            measured_event="kv_memory.pool_end",
            measured_line=4,
            gpu=2,
            uuid=UUID,
            device_total_bytes=80 * GIB,
            device_free_bytes=9 * GIB,
            device_used_bytes=71 * GIB,
            lag_us=80.0,
        )
    )
    live = MemorySeries(ledger=LedgerFigures())
    live.add_instance("host:7", device=Device())  # several devices visible: the environment names none
    fed([pool_end, measured, pool_end], series=live, instance="host:7")
    found = {
        metric.name: (labels.get("gpu"), labels.get("UUID"), value)
        for metric, labels, value in live.samples()
        if metric.name in ("kvlog_device_free_bytes", "kvlog_device_total_bytes")
    }
    # the stated line after the measurement keeps the driver's device; its free memory is the line's again
    assert found == {
        "kvlog_device_free_bytes": ("2", UUID, 10 * GIB),
        "kvlog_device_total_bytes": ("2", UUID, 80 * GIB),
    }


@pytest.mark.parametrize(
    ("environ", "device"),
    [
        ({"CUDA_VISIBLE_DEVICES": UUID}, Device(uuid=UUID, ordinals=())),
        ({"NVIDIA_VISIBLE_DEVICES": UUID}, Device(uuid=UUID, ordinals=())),
        ({"NVIDIA_VISIBLE_DEVICES": "5"}, Device(gpu="5", ordinals=())),  # the container runtime numbers as NVML
        ({"CUDA_VISIBLE_DEVICES": "5", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, Device(gpu="5", ordinals=("5",))),
        ({"CUDA_VISIBLE_DEVICES": "3,2", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, Device(ordinals=("3", "2"))),
        ({"CUDA_VISIBLE_DEVICES": "5"}, Device(ordinals=())),  # CUDA's default order: the fastest first, not NVML's
        ({"CUDA_VISIBLE_DEVICES": "0", "NVIDIA_VISIBLE_DEVICES": "5"}, Device(ordinals=())),  # the container's index
        ({"CUDA_VISIBLE_DEVICES": "0,1"}, Device(ordinals=())),
        ({"NVIDIA_VISIBLE_DEVICES": "all"}, Device()),
        ({"NVIDIA_VISIBLE_DEVICES": "2,3"}, Device(ordinals=())),
        ({"CUDA_VISIBLE_DEVICES": "MIG-8bc6d2f4-7a9e-5b23-9c4f-1e2d3c4b5a69"}, Device(ordinals=())),
        ({}, Device()),
    ],
)
def test_the_live_process_knows_its_device_only_where_its_environment_pins_it(
    environ: dict[str, str], device: Device
) -> None:
    assert process_device(environ) == device


def test_an_ordinal_the_live_process_names_is_the_host_s_index_its_environment_says() -> None:
    def arena(device: int) -> dict[str, Any]:
        return json.loads(
            current(
                "kv_arena.ready", arena_id="0", backend="cuda", device=device, reserved_va_bytes=GIB,
                granularity_bytes=2 << 20,
            )
        )  # fmt: skip

    pool_end = json.loads(current("kv_memory.pool_end", avail_bytes=10 * GIB))
    found = {}
    for name, environ in {
        "remapped": {"CUDA_VISIBLE_DEVICES": "3,2", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
        "unknowable": {"CUDA_VISIBLE_DEVICES": "3,2"},
        "all": {},
    }.items():
        series = MemorySeries(ledger=LedgerFigures())
        series.add_instance(name, device=process_device(environ))
        fed([arena(1), pool_end], series=series, instance=name)
        [labels] = [labels for metric, labels, _ in series.samples() if metric.name == "kvlog_device_free_bytes"]
        found[name] = labels.get("gpu")
    assert found == {"remapped": "2", "unknowable": None, "all": "1"}


def test_kvlog_follow_serves_the_ledger_of_the_log_it_follows(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(SGLANG_18263)
    [row] = ledger_rows(log)
    with following(str(log), tmp_path / "events.jsonl", metrics_port=0, hold_s=0.2) as running:
        wait_for(lambda: any("serving metrics at" in notice for notice in running.notices))
        url = next(n for n in running.notices if "serving metrics at" in n).split("serving metrics at ")[1]
        kv = ("kvlog_device_memory_bytes", "consumer", "kv_committed")  # the pool is held for its look-ahead
        wait_for(
            lambda: any(kv[1:] in key[1] for key in scraped(url, timeout=10) if key[0] == kv[0]), what="the ledger's KV"
        )
        found = scraped(url, timeout=10)
    held = {
        dict(labels)["consumer"]: value
        for (metric, labels), value in found.items()
        if metric == "kvlog_device_memory_bytes"
    }
    assert held == {"weights": row["consumers"]["weights_bytes"], "kv_committed": row["kv_committed_bytes"]}
    assert ("kvlog_series_folded_total", (("label_name", "ranks"), ("server_instance", str(log)))) in found


def test_kvlog_integrate_serves_the_ledger_labelled_with_the_device_the_process_runs_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", UUID)  # the one device this process sees
    logger, handler, events = attached(tmp_path, metrics_port=0, hold_s=0.2)
    try:
        for message in START_UP:
            logger.info(message)
        wait_for(lambda: events.exists() and b"kv_memory.pool_end" in events.read_bytes(), what="the pool's end")
        served = re.search(r"serving metrics of pid [0-9]+ at (http://\S+/metrics)", capsys.readouterr().err)
        assert served is not None
        name, kv = "kvlog_device_memory_bytes", ("consumer", "kv_committed")
        wait_for(
            lambda: any(kv in key[1] for key in scraped(served.group(1), timeout=10) if key[0] == name), what="the KV"
        )
        found = scraped(served.group(1), timeout=10)
    finally:
        handler.close()
    [row] = ledger_rows(events)  # the events the handler wrote: the same rows the gauges show
    held = {dict(labels)["consumer"]: value for (metric, labels), value in found.items() if metric == name}
    assert held == {"weights": row["consumers"]["weights_bytes"], "kv_committed": row["kv_committed_bytes"]}
    assert {dict(labels).get("UUID") for (metric, labels) in found if metric == name} == {UUID}
