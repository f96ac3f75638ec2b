"""Which metrics kvlog exports, and how each catalog event updates them.

This module is the single owner of that mapping: the Prometheus endpoint (``kvlog.metrics.prometheus``),
``kvlog.metrics.serve`` and ``kvlog follow`` only read ``MemorySeries.samples()``. It imports nothing
outside the standard library, so a caller that never serves metrics pays nothing for it.

Labels. Every rank-scoped metric carries ``tp``, ``dp``, ``pp``, ``ep`` (the event's ``ranks``),
``other_ranks`` (every other kind of the event's ``ranks`` as ``kind=rank``, sorted and comma-joined:
``attn_cp=5``, ``moe_dp=1``, vLLM's worker ``rank=3``), ``server`` (``sglang``
or ``vllm``: the prefix of ``migrated.source_format``; ``kvlog`` for an event kvlog emitted live or
wrote as JSON) and ``server_instance`` (which server the series is about: the log path for
``kvlog follow``, what a library caller passes). It is not ``instance`` because Prometheus sets
``instance`` on every scraped series to the scraped target (kvlog's endpoint), which would overwrite it.

Mapping (event -> metric; an event not listed only counts in ``kvlog_events_total``):

- ``kv_pool.allocation`` -> ``kvlog_kv_pool_bytes{allocation_state}`` (K+V bytes, or ``kv_bytes``),
  ``kvlog_kv_pool_tokens`` (``num_tokens``), ``kvlog_kv_pool_committed_bytes`` (``committed_bytes``;
  for an ``allocated`` pool without it, the pool's bytes, which are physically held). A pool has one
  ``allocation_state`` at a time: a new allocation event of the same pool replaces its series.
- ``kv_pool.unified_allocation`` -> the same three, as the pool ``unified``: its sub-pools print no
  event of their own (sglang's format decisions), so it is counted once. A later unified pool of the
  run (a speculative draft worker's) is ``unified#<n>``, ``n`` its position among the run's pools:
  it must not replace the target's.
- ``kv_pool.swa_summary`` -> ``kvlog_kv_pool_swa_total_bytes`` only, never ``kvlog_kv_pool_bytes``: its
  sub-pools (SWA, Full) have their own ``kv_pool.allocation`` events, and a dashboard summing
  ``kvlog_kv_pool_bytes`` must not count the summary a second time.
- ``kv_pool.post_capture_sized`` -> ``kvlog_kv_pool_committed_bytes``, ``kvlog_kv_pool_budget_bytes``,
  ``kvlog_kv_pool_tokens`` (``max_total_num_tokens``, the pool's final size), and
  ``kvlog_memory_avail_bytes{stage="kv_pool.post_capture_sized"}`` (``free_bytes``).
- ``kv_pool.sleep`` / ``kv_pool.wake`` -> ``kvlog_kv_pool_committed_bytes`` less ``freed_bytes`` / plus
  ``restored_bytes`` (only where the pool's committed bytes are known).
- ``kv_pool.extended`` (vLLM) -> ``kvlog_kv_pool_committed_bytes``; ``kv_pool.capacity`` (vLLM) ->
  ``kvlog_kv_pool_tokens`` (``num_tokens``).
- ``kv_pool.usage`` (``--usage``) -> ``kvlog_kv_pool_usage_ratio{pool,device,engine}`` (``fraction`` as
  ``pool="full"``, ``swa_fraction`` as ``swa``, ``host_fraction`` as ``host``) and
  ``kvlog_kv_pool_used_tokens`` (``used_tokens``, ``swa_used_tokens``): the pool's occupancy at the last
  statistics line; ``device`` is the server's name for it (or ``""``), ``engine`` vLLM's engine index.
- ``kv_arena.ready`` -> ``kvlog_arena_reserved_va_bytes``; ``kv_arena.commit`` / ``decommit`` / ``error``
  -> ``kvlog_arena_committed_bytes`` and ``kvlog_arena_measured_committed_bytes`` (dropped when the
  event has no measurement, so that a stale one never sits next to fresh bookkeeping);
  ``kv_arena.closed`` drops the arena's series.
- Every event ``kvlog.schema.readings.FREE_DEVICE_MEMORY`` names (the load and pool-end lines, CUDA-graph
  capture, post-capture sizing, vLLM's extension, the scheduler's limits) ->
  ``kvlog_memory_avail_bytes{stage=<event>}``: free device memory as the server reported it at that stage.
- ``weights.load_end`` -> ``kvlog_weights_bytes`` (``mem_usage_bytes``); ``cuda_graph.captured`` ->
  ``kvlog_cuda_graph_bytes``; ``mamba_pool.allocation`` -> ``kvlog_mamba_pool_bytes`` (all its state
  buffers); ``kv_host_pool.allocation`` -> ``kvlog_host_pool_bytes`` (pinned host memory, never device).
- ``memory.profile``, ``memory.profile_budget``, ``memory.profile_usage`` (vLLM) and
  ``kv_pool.memory_available`` -> ``kvlog_memory_profile_bytes{quantity}``: the engine's plan before
  sizing the KV cache (``kv_cache`` is memory set aside, not a pool's allocation).
- ``kv_pool.state_corrected`` -> moves the corrected pool's ``kvlog_kv_pool_bytes`` (or its summary's
  ``kvlog_kv_pool_swa_total_bytes``) to the ``allocation_state`` that holds, and sets its
  ``kvlog_kv_pool_committed_bytes`` as a pool event of that state would (``committed_bytes``; an
  ``allocated`` pool's size, else no series): the earlier event's series never stay beside it.
- with a ``ledger`` (``kvlog follow``, ``kvlog integrate``, ``serve``): every event but the usage lines is
  kept in its rank's run, and the run's ledger row (``kvlog ledger``'s, worked out by ``kvlog.ledger``
  at the first scrape after a new event) sets ``kvlog_device_memory_bytes{consumer}`` (each consumer of
  ``kvlog.ledger.CONSUMERS`` a line states, and ``kv_committed``), ``kvlog_device_unaccounted_bytes``,
  ``kvlog_device_total_bytes``, ``kvlog_device_free_bytes``, ``kvlog_device_memory_ceiling_bytes``,
  ``kvlog_kv_va_upper_bound_bytes`` (address space: never a consumer) and
  ``kvlog_device_memory_uncertainty_bytes{figure}``; a figure no line states has no series. They carry
  ``gpu`` and ``UUID`` (DCGM exporter's device labels) where a line names the device (sglang's
  ``[gpu_id=N]``, an arena's ``device``) or the live process knows it (``add_instance(device=...)``; the
  device NVML measured a rank's records on, ``device_memory.measured``, outranks both).
- ``kvlog.schema_violation`` -> ``kvlog_schema_violations_total`` (1 plus its ``suppressed``).
- every event -> ``kvlog_events_total{event}``.

Pool identity. Two pools of one run and rank must never share series (a target pool and its
speculative draft pool both print pool=null, label=null). The ``pool`` label is the event's ``pool``,
else its ``label``, else ``#<n>``: the pool's position among the run's pool allocations on that
server_instance and rank (named pools count too; ``#0`` is the first), counted since the rank's last
``weights.load_begin``. The ``label`` label is the event's ``label`` (or ``""``), so pools sharing a
class name (``SWAKVPool`` SWA and Full) stay apart. An event about a pool that names neither
(``kv_pool.post_capture_sized`` of the target, ``kv_pool.extended``, ``kv_pool.capacity``, an unnamed
``kv_pool.sleep``) means ``#0``, the run's first pool: servers allocate the target's pool before a
draft's. Where the first pool was named (a hybrid target's SWA sub-pool), ``#0`` then holds only
those events' figures, never another pool's. An event about the draft that names no pool but has the
label ``draft`` (sglang 0.5.22's ``Post-capture KV sizing: draft KV cache allocated``) means the run's
last pool that named neither, when that is not ``#0``: the draft's allocation numbered it, and two
series of one pool would count it twice. Host and Mamba pools: their ``label``, else ``#<n>``.

Restarts. ``weights.load_begin`` starts a new run of its rank: every rank-scoped series of that
server_instance and rank is removed before the event's own value is set, so a dashboard never shows
the previous run's pools next to the new ones. The counters (``*_total``) carry no rank and survive
restarts, as counters must. A rank the new run no longer has (a smaller ``tp_size`` in the same log)
prints no ``weights.load_begin``, so its series stay until that rank starts again.

Bounded labels. The values of ``pool`` and ``label`` (a pool's identity, ``#n`` included), ``arena``,
``event`` and ``server`` come from log text; each server_instance keeps the first
``label_values`` distinct values of each (default 64, ``kvlog.metrics.bound``), and an update with a
later one goes to the series whose value is ``#other`` (the last such update's figure) and counts in
``kvlog_series_folded_total{label_name}``. The ledger's ranks are bounded the same way: the first
``label_values`` ranks of a server_instance have a ledger (64: eight nodes of eight devices in one log);
a later rank's events are not kept (a ledger of folded ranks would add up no device) and count in
``kvlog_series_folded_total{label_name="ranks"}``. Its ``consumer`` and ``figure`` values are the
table's, whatever the log says, and a rank has one device: at most 64 × (2 × consumers + 12) series a
server_instance.

A label with no value (a rank kind the event lacks, a pool with no ``label``, no other ranks) is
left out of ``samples()``, never exported as ``""``: Prometheus stores an empty label as no label, so
what it stores, and every query, rule and dashboard, are the same either way, and the exposition says
what is stored (``{dp=""}`` still matches a server without data parallelism). A placeholder such as
``none`` would be a value that queries match and sums group by. Samples of one family may then carry
different label names, which the text and OpenMetrics formats allow.

Counters. ``kvlog_unparsed_lines_total``, ``kvlog_schema_violations_total`` and
``kvlog_series_folded_total`` (per ``label_name``) exist at 0 from the moment an instance is known
(``add_instance``; ``kvlog follow`` counts 0 when it starts following a file), so the first lines
counted are a rise from 0 that ``increase()`` sees. ``kvlog_events_total`` starts with its first event:
its ``event`` and ``server`` come from the event.

Odd input (a missing field, a wrong type, a negative size) skips that one update and never raises:
the series are fed from emission taps and live logs, where an exception would be a lost event.
"""

from __future__ import annotations

import math
import os
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol, TypeVar

from kvlog.metrics.bound import BOUNDED, DEFAULT_LIMIT, FOLDED, LabelBound
from kvlog.schema.readings import FREE_DEVICE_MEMORY, json_integer, json_number, migrated_line

RANK_KINDS = ("tp", "dp", "pp", "ep")
#: the labels that name a rank: without ``other_ranks``, two vLLM workers (``rank=0``, ``rank=1``, no
#: ``tp``) or two ``MOE_DP`` ranks would write one series, and one's restart would remove the other's
_RANK_LABELS = (*RANK_KINDS, "other_ranks")
_SCOPE = (*_RANK_LABELS, "server", "server_instance")
_POOL = ("pool", "label", *_SCOPE)


@dataclass(frozen=True)
class Metric:
    """One exported metric: its Prometheus name, help text, type, label names and base unit."""

    name: str
    help: str
    kind: Literal["gauge", "counter"]
    labels: tuple[str, ...]
    unit: str

    @property
    def rank_scoped(self) -> bool:
        """Whether a restart of a rank removes this metric's series of that rank."""
        return "tp" in self.labels


KV_POOL_BYTES = Metric(
    "kvlog_kv_pool_bytes",
    "Size of a device KV pool's buffers: allocated memory, or only an address-space upper bound (allocation_state).",
    "gauge",
    ("allocation_state", *_POOL),
    "bytes",
)
KV_POOL_COMMITTED = Metric(
    "kvlog_kv_pool_committed_bytes",
    "Physical memory committed behind a device KV pool.",
    "gauge",
    _POOL,
    "bytes",
)
KV_POOL_BUDGET = Metric(
    "kvlog_kv_pool_budget_bytes",
    "Memory budget post-capture sizing gave a KV pool.",
    "gauge",
    _POOL,
    "bytes",
)
KV_POOL_TOKENS = Metric("kvlog_kv_pool_tokens", "Token slots a device KV pool holds.", "gauge", _POOL, "tokens")
_USAGE = ("pool", "device", "engine", *_SCOPE)
KV_POOL_USAGE = Metric(
    "kvlog_kv_pool_usage_ratio",
    "Share of a KV pool's slots in use at the server's last statistics line (1 is full): pool full (the device "
    "pool, or a hybrid model's full-attention one), swa (its sliding-window one), host (vLLM's swap space).",
    "gauge",
    _USAGE,
    "ratio",
)
KV_POOL_USED_TOKENS = Metric(
    "kvlog_kv_pool_used_tokens",
    "Tokens a KV pool holds at the server's last statistics line (pool full or swa).",
    "gauge",
    _USAGE,
    "tokens",
)
KV_POOL_SWA_TOTAL = Metric(
    "kvlog_kv_pool_swa_total_bytes",
    "Total of a hybrid SWA pool's sub-pools, which kvlog_kv_pool_bytes already holds: never add the two.",
    "gauge",
    ("allocation_state", *_SCOPE),
    "bytes",
)
ARENA_RESERVED = Metric(
    "kvlog_arena_reserved_va_bytes",
    "Address space a KV arena reserved: an upper bound that costs no memory.",
    "gauge",
    ("arena", *_SCOPE),
    "bytes",
)
ARENA_COMMITTED = Metric(
    "kvlog_arena_committed_bytes",
    "Physical memory committed in a KV arena, by kvlog's bookkeeping.",
    "gauge",
    ("arena", *_SCOPE),
    "bytes",
)
ARENA_MEASURED = Metric(
    "kvlog_arena_measured_committed_bytes",
    "Physical memory committed in a KV arena, as the driver or kernel measured it.",
    "gauge",
    ("arena", *_SCOPE),
    "bytes",
)
MEMORY_AVAIL = Metric(
    "kvlog_memory_avail_bytes",
    "Free device memory the server reported at a start-up stage (the event that reported it).",
    "gauge",
    ("stage", *_SCOPE),
    "bytes",
)
MEMORY_PROFILE = Metric(
    "kvlog_memory_profile_bytes",
    "The engine's memory plan before sizing the KV cache, by quantity.",
    "gauge",
    ("quantity", *_SCOPE),
    "bytes",
)
WEIGHTS = Metric("kvlog_weights_bytes", "Device memory the model weights took.", "gauge", _SCOPE, "bytes")
CUDA_GRAPH = Metric(
    "kvlog_cuda_graph_bytes", "Device memory CUDA-graph capture took (activations).", "gauge", _SCOPE, "bytes"
)
MAMBA_POOL = Metric(
    "kvlog_mamba_pool_bytes",
    "State buffers of a hybrid state-space model's pool.",
    "gauge",
    ("pool", *_SCOPE),
    "bytes",
)
HOST_POOL = Metric(
    "kvlog_host_pool_bytes",
    "Pinned host memory of a hierarchical (HiCache) KV pool.",
    "gauge",
    ("pool", *_SCOPE),
    "bytes",
)
EVENTS = Metric(
    "kvlog_events_total",
    "Events kvlog observed, by event name.",
    "counter",
    ("event", "server", "server_instance"),
    "1",
)
UNPARSED = Metric(
    "kvlog_unparsed_lines_total",
    "Log lines kvlog could not read as events.",
    "counter",
    ("server_instance",),
    "1",
)
VIOLATIONS = Metric(
    "kvlog_schema_violations_total",
    "Events that failed schema validation.",
    "counter",
    ("server_instance",),
    "1",
)
#: the labels that join DCGM exporter's device series: its ``gpu`` (the device's index) and ``UUID``
_DEVICE = ("gpu", "UUID")
_LEDGER = (*_DEVICE, *_SCOPE)
LEDGER_MEMORY = Metric(
    "kvlog_device_memory_bytes",
    "Device memory each consumer held at the end of start-up, as kvlog ledger reads it (kv_committed: the KV "
    "cache's committed memory); a consumer no line states has no series. With kvlog_device_free_bytes and "
    "kvlog_device_unaccounted_bytes it adds up to kvlog_device_total_bytes.",
    "gauge",
    ("consumer", *_LEDGER),
    "bytes",
)
LEDGER_UNACCOUNTED = Metric(
    "kvlog_device_unaccounted_bytes",
    "Device memory no line accounts for (kvlog ledger): total - consumers - KV committed - free; negative "
    "when the lines state more than the device holds.",
    "gauge",
    _LEDGER,
    "bytes",
)
LEDGER_TOTAL = Metric(
    "kvlog_device_total_bytes", "The device's total memory, as a line states it.", "gauge", _LEDGER, "bytes"
)
LEDGER_FREE = Metric(
    "kvlog_device_free_bytes",
    "Free device memory at the end of start-up: the run's last measurement of it.",
    "gauge",
    _LEDGER,
    "bytes",
)
LEDGER_CEILING = Metric(
    "kvlog_device_memory_ceiling_bytes",
    "The most device memory the run could hold: the device's total, else the free memory before its weights load.",
    "gauge",
    _LEDGER,
    "bytes",
)
LEDGER_VA = Metric(
    "kvlog_kv_va_upper_bound_bytes",
    "Address space the run's KV pools reserved (kvlog ledger): an upper bound, not memory; never add it to "
    "kvlog_device_memory_bytes.",
    "gauge",
    _LEDGER,
    "bytes",
)
LEDGER_UNCERTAINTY = Metric(
    "kvlog_device_memory_uncertainty_bytes",
    "What the printed rounding of a ledger figure hides, either way (figure: a consumer, kv_committed, "
    "device_total, free, unaccounted, ceiling, kv_va_upper_bound).",
    "gauge",
    ("figure", *_LEDGER),
    "bytes",
)
#: the metrics a run's ledger sets: worked out again from the run's events whenever a scrape follows a new one
LEDGER_METRICS = (
    LEDGER_MEMORY,
    LEDGER_UNACCOUNTED,
    LEDGER_TOTAL,
    LEDGER_FREE,
    LEDGER_CEILING,
    LEDGER_VA,
    LEDGER_UNCERTAINTY,
)
FOLDS = Metric(
    "kvlog_series_folded_total",
    'Updates folded into a label\'s "#other" series: its server_instance had used up its values of the label.',
    "counter",
    ("label_name", "server_instance"),
    "1",
)

METRICS: tuple[Metric, ...] = (
    KV_POOL_BYTES,
    KV_POOL_COMMITTED,
    KV_POOL_BUDGET,
    KV_POOL_TOKENS,
    KV_POOL_USAGE,
    KV_POOL_USED_TOKENS,
    KV_POOL_SWA_TOTAL,
    ARENA_RESERVED,
    ARENA_COMMITTED,
    ARENA_MEASURED,
    MEMORY_AVAIL,
    MEMORY_PROFILE,
    WEIGHTS,
    CUDA_GRAPH,
    MAMBA_POOL,
    HOST_POOL,
    *LEDGER_METRICS,
    EVENTS,
    UNPARSED,
    VIOLATIONS,
    FOLDS,
)

_Key = tuple[str, ...]
_Rank = tuple[str, str, str, str, str]
#: the part of a rank-scoped series' key that names its run: (server_instance, rank)
_RunKey = tuple[str, _Rank]
_Value = TypeVar("_Value", str, tuple[str, str])

#: the label of an event about the speculative draft's pool that names no pool (``Post-capture KV sizing: draft ...``)
_DRAFT = "draft"
_PROFILE_FIELDS: dict[str, dict[str, str]] = {
    "memory.profile": {
        "total_bytes": "total",
        "initial_usage_bytes": "initial_usage",
        "peak_torch_bytes": "peak_torch",
        "post_profile_usage_bytes": "post_profile_usage",
        "non_torch_bytes": "non_torch",
        "kv_cache_bytes": "kv_cache",
    },
    "memory.profile_budget": {"total_bytes": "total", "budget_bytes": "budget"},
    "memory.profile_usage": {
        "weights_bytes": "weights",
        "non_torch_bytes": "non_torch",
        "activation_peak_bytes": "activation_peak",
        "kv_cache_bytes": "kv_cache",
    },
    "kv_pool.memory_available": {"available_bytes": "kv_cache"},
}
#: ``kv_pool.usage``: (the ``pool`` label, the share's field, the tokens' field)
_USAGE_FIELDS = (
    ("full", "fraction", "used_tokens"),
    ("swa", "swa_fraction", "swa_used_tokens"),
    ("host", "host_fraction", None),
)
_MAMBA_FIELDS = (
    "conv_state_bytes",
    "ssm_state_bytes",
    "intermediate_ssm_state_bytes",
    "intermediate_conv_window_bytes",
)


def _number(value: object) -> float | None:
    """A finite, non-negative number, or None for anything else (bool included: JSON true is no size).

    An integer beyond a float's range (JSON allows any) is no size either: ``float()`` would raise.
    """
    if not json_number(value):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _pool_bytes(event: Mapping[str, Any]) -> float | None:
    """K+V bytes of an MHA pool, ``kv_bytes`` of an MLA one; None when neither is complete."""
    kv = _number(event.get("kv_bytes"))
    if kv is not None:
        return kv
    k, v = _number(event.get("k_bytes")), _number(event.get("v_bytes"))
    return k + v if k is not None and v is not None else None


def server_of(event: Mapping[str, Any]) -> str:
    """``sglang``/``vllm`` from a migrated event's source format; ``kvlog`` for kvlog's own events."""
    migrated = event.get("migrated")
    source = _text(migrated.get("source_format")) if isinstance(migrated, Mapping) else None
    if source is None:
        return "kvlog"
    return source.split("/", 1)[0].split("-", 1)[0] or "kvlog"


def _rank_of(event: Mapping[str, Any]) -> _Rank | None:
    """The rank label values; None when ``ranks`` is malformed (the event is then skipped)."""
    ranks = event.get("ranks", {})
    if ranks is None:
        ranks = {}
    if not isinstance(ranks, Mapping):
        return None
    numbers = {kind: json_integer(rank) for kind, rank in ranks.items() if rank is not None}  # 1.0 is rank 1
    if None in numbers.values():
        return None
    values = ["" if numbers.get(kind) is None else str(numbers[kind]) for kind in RANK_KINDS]
    others = sorted(f"{kind}={rank}" for kind, rank in numbers.items() if kind not in RANK_KINDS)
    return values[0], values[1], values[2], values[3], ",".join(others)


class Device(NamedTuple):
    """The device a live process runs on, as far as it knows it: DCGM exporter's ``gpu`` index and ``UUID``."""

    gpu: str = ""
    uuid: str = ""
    #: the host's index of each device ordinal the process's lines name (an arena's ``device``), where its
    #: environment renumbered them (``CUDA_VISIBLE_DEVICES=2,3``: ordinal 1 is the host's 3); () where it
    #: renumbered them beyond knowing (UUIDs); None where it did not: an ordinal is the host's index
    ordinals: tuple[str, ...] | None = None

    def index_of(self, ordinal: int) -> str:
        """The host's index of the process's device ``ordinal`` ("": unknown)."""
        if self.ordinals is None:
            return str(ordinal)
        return self.ordinals[ordinal] if ordinal < len(self.ordinals) else ""


class Ledger(Protocol):
    """What ``kvlog ledger`` says of one rank's run (``kvlog.metrics.ledger.LedgerFigures``).

    Passed in rather than imported: the ledger's arithmetic (``kvlog.ledger``) reads events through the
    migration's rank keys, which this module, loaded by every emitting server, must not import.
    """

    def reads(self, event: str) -> bool:
        """Whether events named ``event`` can change a ledger (usage statistics cannot: they are not kept)."""

    def supersedes(self, event: Mapping[str, Any], previous: Mapping[str, Any]) -> bool:
        """Whether ``event`` leaves the run's ledger as if ``previous``, the run's last event kept, had not been."""

    def figures(self, events: Sequence[Mapping[str, Any]]) -> list[tuple[Metric, tuple[str, ...], float]]:
        """Each figure the run's ``events`` state: a ledger metric, its labels before the device's, its value."""


def _device_ordinal(event: Mapping[str, Any]) -> int | None:
    """The device a line names: sglang's ``[gpu_id=N]`` prefix (rank ``gpu``), an arena's ``device``; else None."""
    ranks = event.get("ranks")
    gpu = json_integer(ranks.get("gpu")) if isinstance(ranks, Mapping) else None
    if gpu is None and event.get("event") == "kv_arena.ready":
        gpu = json_integer(event.get("device"))
    return gpu if gpu is not None and gpu >= 0 else None


def _measured_device(event: Mapping[str, Any]) -> tuple[str, str] | None:
    """The (gpu, UUID) NVML measured a record on (``kvlog integrate --nvml``); None for any other event."""
    if event.get("event") != "device_memory.measured":
        return None
    gpu, uuid = json_integer(event.get("gpu")), event.get("uuid")
    if gpu is None or gpu < 0:
        return None
    return str(gpu), uuid if isinstance(uuid, str) else ""


@dataclass(frozen=True)
class _Scope:
    """Where one event's series live: its rank, server and server_instance, in label order."""

    rank: _Rank
    server: str
    instance: str

    @property
    def labels(self) -> _Key:
        return (*self.rank, self.server, self.instance)

    @property
    def run(self) -> _RunKey:
        return (self.instance, self.rank)


@dataclass
class _Run:
    """What one run of one rank of one server_instance set: removed whole by the rank's next ``weights.load_begin``.

    Indexing the series by run keeps every update proportional to its own run's series: a restart or a
    pool's new allocation never walks the series of the other ranks and servers a follower feeds.
    """

    values: dict[Metric, dict[_Key, float]] = field(default_factory=dict)
    #: the number of pools of each metric the run has numbered so far
    positions: dict[Metric, int] = field(default_factory=dict)
    #: the position of the run's last pool that named neither pool nor label
    draft: int = -1
    #: the pool each pool event's ``migrated.line`` set: what a ``kv_pool.state_corrected`` names
    pools_by_line: dict[int, _Key] = field(default_factory=dict)
    #: the run's events the ledger reads, and whether its series predate the last of them
    ledger_events: list[Mapping[str, Any]] = field(default_factory=list)
    ledger_stale: bool = False
    #: the run's labels after the device's (rank, server, server_instance) and its device's (gpu, UUID)
    ledger_scope: _Key = ()
    device: tuple[str, str] = ("", "")
    #: the device as the driver named it (``device_memory.measured``'s NVML index and UUID): it outranks the
    #: environment's word and the lines' ordinals from then on
    measured: bool = False


class MemorySeries:
    """The current value of every series, fed event by event; thread-safe.

    One per process (``kvlog.metrics.serve``) or per ``kvlog follow`` run. Readers take a consistent
    snapshot with ``samples()``.
    """

    def __init__(self, *, label_values: int = DEFAULT_LIMIT, ledger: Ledger | None = None) -> None:
        """``label_values``: how many distinct values a label the log names keeps per server_instance (``bound``).

        ``ledger`` sets the ledger's series (``kvlog_device_memory_bytes`` ...) from each rank's run; without
        it, there are none. Its ranks are bounded too: the first ``label_values`` ranks of each
        server_instance have a ledger, a later one's events count in ``kvlog_series_folded_total{label_name="ranks"}``.
        """
        self._lock = threading.Lock()
        self._bound = LabelBound(label_values)
        self._ledger = ledger
        #: the device each live server_instance knows it runs on (``add_instance``)
        self._devices: dict[str, Device] = {}
        #: the server_instances whose counters exist (at 0 until counted)
        self._instances: set[str] = set()
        #: the rank-scoped series, by run; the counters (no rank) by metric
        self._runs: dict[_RunKey, _Run] = {}
        self._counters: dict[Metric, dict[_Key, float]] = {metric: {} for metric in METRICS if not metric.rank_scoped}
        self._handlers: dict[str, Callable[[Mapping[str, Any], _Scope], None]] = {
            "weights.load_begin": self._load_begin,
            "weights.load_end": self._load_end,
            "kv_pool.allocation": self._allocation,
            "kv_pool.unified_allocation": self._unified,
            "kv_pool.swa_summary": self._swa_summary,
            "kv_pool.post_capture_sized": self._post_capture,
            "kv_pool.sleep": self._sleep,
            "kv_pool.wake": self._wake,
            "kv_pool.extended": self._extended,
            "kv_pool.capacity": self._capacity,
            "kv_pool.usage": self._usage,
            "kv_arena.ready": self._arena_ready,
            "kv_arena.commit": self._arena_committed,
            "kv_arena.decommit": self._arena_committed,
            "kv_arena.error": self._arena_committed,
            "kv_arena.closed": self._arena_closed,
            "cuda_graph.captured": self._cuda_graph,
            "mamba_pool.allocation": self._mamba,
            "kv_host_pool.allocation": self._host_pool,
            "kv_pool.state_corrected": self._state_corrected,
            "kvlog.schema_violation": self._violation,
        }

    # -- public API -------------------------------------------------------------------------------

    def observe(self, event: Mapping[str, Any], *, instance: str) -> None:
        """Update the series from one event dict (as written: envelope, fields, ``migrated``)."""
        if not isinstance(event, Mapping):
            return
        name = _text(event.get("event"))
        rank = _rank_of(event)
        if name is None or rank is None:
            return
        with self._lock:
            self._known(instance)
            scope = _Scope(rank, self._bounded(instance, "server", server_of(event), FOLDED), instance)
            self._add(EVENTS, (self._bounded(instance, "event", name, FOLDED), scope.server, instance), 1.0)
            handler = self._handlers.get(name)
            if handler is not None:
                handler(event, scope)
            if self._ledger is not None and self._ledger.reads(name):
                self._keep_for_ledger(event, scope)
            avail = FREE_DEVICE_MEMORY.get(name)
            if avail is not None:
                self._set(MEMORY_AVAIL, (name, *scope.labels), _number(event.get(avail)))
            for field, quantity in _PROFILE_FIELDS.get(name, {}).items():
                self._set(MEMORY_PROFILE, (quantity, *scope.labels), _number(event.get(field)))

    def add_instance(self, instance: str, *, device: Device | None = None) -> None:
        """Export the counters of ``instance`` from now, at 0: its first increment is then a rise Prometheus sees.

        A counter that first appears at N is no increase to ``increase()``/``rate()``: the lines that
        created it (a start-up's new wording) would never alert. ``observe`` and the ``count_*`` calls
        add the instance too (``kvlog follow`` counts 0 for a file when it first follows it). ``device``:
        the device a live server_instance runs on (``kvlog.metrics.device``), its ledger series' labels.
        """
        with self._lock:
            self._known(instance)
            if device is not None:
                self._devices[instance] = device

    def count_unparsed(self, lines: int, *, instance: str) -> None:
        """Count log lines that were read but gave no event (0: the instance's counters exist from now)."""
        count = _number(lines)
        if count is not None:
            with self._lock:
                self._known(instance)
                self._add(UNPARSED, (instance,), count)

    def count_violations(self, count: int, *, instance: str) -> None:
        """Count events that failed validation outside emission (``kvlog follow``'s checks)."""
        number = _number(count)
        if number is not None:
            with self._lock:
                self._known(instance)
                self._add(VIOLATIONS, (instance,), number)

    def samples(self) -> list[tuple[Metric, dict[str, str], float]]:
        """Every series as (metric, labels, value), in ``METRICS`` order, taken under the lock.

        The labels are the metric's, less those with no value (see the module's docstring).
        """
        with self._lock:
            for run in self._runs.values():
                if run.ledger_stale:
                    self._set_ledger(run)
            return [
                (metric, _exported(metric, key), value)
                for metric in METRICS
                for series in self._all(metric)
                for key, value in series.items()
            ]

    # -- storage ----------------------------------------------------------------------------------

    def _known(self, instance: str) -> None:
        """Every counter of a new ``instance`` at 0 (but ``kvlog_events_total``: its labels come from events)."""
        if instance not in self._instances:
            self._instances.add(instance)
            self._add(UNPARSED, (instance,), 0.0)
            self._add(VIOLATIONS, (instance,), 0.0)
            for label in (*BOUNDED, *(("ranks",) if self._ledger is not None else ())):
                self._add(FOLDS, (label, instance), 0.0)

    def _keep_for_ledger(self, event: Mapping[str, Any], scope: _Scope) -> None:
        """Keep ``event`` in its run's ledger, if its rank has one (bounded per server_instance: ``LabelBound``)."""
        run = self._run(scope.run)
        if not run.ledger_events and not self._bound.admits(scope.instance, "ranks", scope.rank):
            self._add(FOLDS, ("ranks", scope.instance), 1.0)
            return
        measured = _measured_device(event)
        if measured is not None:
            run.device, run.measured = measured, True
        elif not run.measured:
            known = self._devices.get(scope.instance, Device())
            ordinal = _device_ordinal(event)
            named = known.index_of(ordinal) if ordinal is not None else run.device[0]
            run.device = (known.gpu or named, known.uuid)
        kept = run.ledger_events
        if kept and self._ledger is not None and self._ledger.supersedes(event, kept[-1]):
            kept[-1] = event  # an arena's commits, one after another: the run keeps what its ledger reads
        else:
            kept.append(event)
        run.ledger_scope = scope.labels
        run.ledger_stale = True

    def _set_ledger(self, run: _Run) -> None:
        """The run's ledger series, worked out again from its events by the ledger's own arithmetic."""
        run.ledger_stale = False
        for metric in LEDGER_METRICS:
            run.values.pop(metric, None)
        if self._ledger is None:
            return
        try:
            figures = self._ledger.figures(run.ledger_events)
        except Exception:  # noqa: BLE001 - odd input skips the update and never raises into a scrape
            return
        for metric, labels, value in figures:
            run.values.setdefault(metric, {})[(*labels, *run.device, *run.ledger_scope)] = value

    def _all(self, metric: Metric) -> list[dict[_Key, float]]:
        if not metric.rank_scoped:
            return [self._counters[metric]]
        return [run.values[metric] for run in self._runs.values() if metric in run.values]

    def _run(self, scope: _RunKey) -> _Run:
        run = self._runs.get(scope)
        if run is None:
            run = self._runs[scope] = _Run()
        return run

    def _series(self, metric: Metric, key: _Key) -> dict[_Key, float]:
        """The series of ``metric`` that ``key`` belongs with: its run's, for a rank-scoped metric.

        A rank-scoped key ends with its scope (``_SCOPE``): rank labels, server, server_instance.
        """
        if not metric.rank_scoped:
            return self._counters[metric]
        rank: _Rank = key[-7], key[-6], key[-5], key[-4], key[-3]
        return self._run((key[-1], rank)).values.setdefault(metric, {})

    def _set(self, metric: Metric, key: _Key, value: float | None) -> None:
        if value is not None:
            self._series(metric, key)[key] = value

    def _get(self, metric: Metric, key: _Key) -> float | None:
        return self._series(metric, key).get(key)

    def _pop(self, metric: Metric, key: _Key) -> None:
        self._series(metric, key).pop(key, None)

    def _add(self, metric: Metric, key: _Key, amount: float) -> None:
        series = self._series(metric, key)
        series[key] = series.get(key, 0.0) + amount

    def _drop_states(self, metric: Metric, key: _Key) -> None:
        """Remove the series of ``key`` under every state (the label before it): within its run only."""
        series = self._series(metric, key)
        for old in [old for old in series if old[1:] == key]:
            del series[old]

    def _bounded(self, instance: str, label: str, value: _Value, folded: _Value) -> _Value:
        """``value``, or ``folded`` (counted) once ``instance`` has used up its distinct values of ``label``."""
        if self._bound.admits(instance, label, value):
            return value
        self._add(FOLDS, (label, instance), 1.0)
        return folded

    def _pool_key(self, event: Mapping[str, Any], scope: _Scope, metric: Metric, *, allocating: bool) -> _Key:
        """(pool, label) of the event's pool, within the bound; ``allocating`` numbers a new pool that names neither."""
        return self._bounded(scope.instance, "pool", self._pool_name(event, scope, metric, allocating), (FOLDED, ""))

    def _pool_name(self, event: Mapping[str, Any], scope: _Scope, metric: Metric, allocating: bool) -> tuple[str, str]:
        pool, label = _text(event.get("pool")), _text(event.get("label"))
        if allocating:
            order = self._next_position(scope, metric)
            if pool is None and label is None:
                self._run(scope.run).draft = order
        elif pool is None and label == _DRAFT:
            order = self._run(scope.run).draft
            if order > 0:  # the draft's own allocation event numbered it: its series, not a second one
                return (f"#{order}", "")
        else:
            order = 0
        if pool is None and label is None:
            pool = f"#{order}"
        return (pool if pool is not None else label or "", label or "")

    def _next_position(self, scope: _Scope, metric: Metric) -> int:
        """The position of a new pool among the run's pools of ``metric`` (named ones count too)."""
        positions = self._run(scope.run).positions
        position = positions.get(metric, 0)
        positions[metric] = position + 1
        return position

    # -- handlers (called under the lock) ---------------------------------------------------------

    def _load_begin(self, _event: Mapping[str, Any], scope: _Scope) -> None:
        self._runs.pop((scope.instance, scope.rank), None)

    def _load_end(self, event: Mapping[str, Any], scope: _Scope) -> None:
        self._set(WEIGHTS, scope.labels, _number(event.get("mem_usage_bytes")))

    def _allocation(self, event: Mapping[str, Any], scope: _Scope) -> None:
        state, size = _text(event.get("allocation_state")), _pool_bytes(event)
        if state is None or size is None:
            return
        self._pool(self._pool_key(event, scope, KV_POOL_BYTES, allocating=True), state, size, event, scope)

    def _unified(self, event: Mapping[str, Any], scope: _Scope) -> None:
        state, size = _text(event.get("allocation_state")), _number(event.get("total_bytes"))
        if state is not None and size is not None:
            position = self._next_position(scope, KV_POOL_BYTES)
            name = ("unified" if position == 0 else f"unified#{position}", "")
            self._pool(self._bounded(scope.instance, "pool", name, (FOLDED, "")), state, size, event, scope)

    def _pool(self, pool: _Key, state: str, size: float, event: Mapping[str, Any], scope: _Scope) -> None:
        """A pool's (new) allocation replaces all its series, so it has one allocation_state at a time."""
        key = (*pool, *scope.labels)
        self._drop_states(KV_POOL_BYTES, key)
        self._pop(KV_POOL_COMMITTED, key)
        self._pop(KV_POOL_TOKENS, key)
        self._set(KV_POOL_BYTES, (state, *key), size)
        self._set(KV_POOL_TOKENS, key, _number(event.get("num_tokens")))
        committed = _number(event.get("committed_bytes"))
        self._set(KV_POOL_COMMITTED, key, size if committed is None and state == "allocated" else committed)
        line = migrated_line(event)
        if line is not None:
            self._run(scope.run).pools_by_line[line] = pool

    def _swa_summary(self, event: Mapping[str, Any], scope: _Scope) -> None:
        state = _text(event.get("allocation_state"))
        if state is not None:
            self._drop_states(KV_POOL_SWA_TOTAL, scope.labels)
            self._set(KV_POOL_SWA_TOTAL, (state, *scope.labels), _number(event.get("total_bytes")))

    def _post_capture(self, event: Mapping[str, Any], scope: _Scope) -> None:
        key = (*self._pool_key(event, scope, KV_POOL_BYTES, allocating=False), *scope.labels)
        self._set(KV_POOL_COMMITTED, key, _number(event.get("committed_bytes")))
        self._set(KV_POOL_BUDGET, key, _number(event.get("budget_bytes")))
        self._set(KV_POOL_TOKENS, key, _number(event.get("max_total_num_tokens")))

    def _sleep(self, event: Mapping[str, Any], scope: _Scope) -> None:
        self._shift_committed(event, scope, _number(event.get("freed_bytes")), -1.0)

    def _wake(self, event: Mapping[str, Any], scope: _Scope) -> None:
        self._shift_committed(event, scope, _number(event.get("restored_bytes")), 1.0)

    def _shift_committed(self, event: Mapping[str, Any], scope: _Scope, amount: float | None, sign: float) -> None:
        key = (*self._pool_key(event, scope, KV_POOL_BYTES, allocating=False), *scope.labels)
        current = self._get(KV_POOL_COMMITTED, key)
        if current is not None and amount is not None:
            self._set(KV_POOL_COMMITTED, key, max(0.0, current + sign * amount))

    def _extended(self, event: Mapping[str, Any], scope: _Scope) -> None:
        key = (*self._pool_key(event, scope, KV_POOL_BYTES, allocating=False), *scope.labels)
        self._set(KV_POOL_COMMITTED, key, _number(event.get("committed_bytes")))

    def _capacity(self, event: Mapping[str, Any], scope: _Scope) -> None:
        key = (*self._pool_key(event, scope, KV_POOL_BYTES, allocating=False), *scope.labels)
        self._set(KV_POOL_TOKENS, key, _number(event.get("num_tokens")))

    def _usage(self, event: Mapping[str, Any], scope: _Scope) -> None:
        """The last statistics line's usage of each pool it names: a gauge that moves with the traffic."""
        # the device names the pool: its values count against the bound of pool identities
        device = self._bounded(scope.instance, "pool", (_text(event.get("device")) or "", "usage"), (FOLDED, ""))[0]
        engine = json_integer(event.get("engine"))
        where = (device, "" if engine is None else str(engine), *scope.labels)
        for pool, share, tokens in _USAGE_FIELDS:
            self._set(KV_POOL_USAGE, (pool, *where), _number(event.get(share)))
            if tokens is not None:
                self._set(KV_POOL_USED_TOKENS, (pool, *where), _number(event.get(tokens)))

    def _arena(self, event: Mapping[str, Any], scope: _Scope) -> str | None:
        arena = _text(event.get("arena_id"))
        return None if arena is None else self._bounded(scope.instance, "arena", arena, FOLDED)

    def _arena_ready(self, event: Mapping[str, Any], scope: _Scope) -> None:
        arena = self._arena(event, scope)
        if arena is not None:
            self._set(ARENA_RESERVED, (arena, *scope.labels), _number(event.get("reserved_va_bytes")))

    def _arena_committed(self, event: Mapping[str, Any], scope: _Scope) -> None:
        committed = _number(event.get("committed_bytes"))
        arena = self._arena(event, scope) if committed is not None else None
        if arena is None or committed is None:
            return
        key = (arena, *scope.labels)
        self._set(ARENA_COMMITTED, key, committed)
        measured = _number(event.get("measured_committed_bytes"))
        if measured is None:
            self._pop(ARENA_MEASURED, key)
        self._set(ARENA_MEASURED, key, measured)

    def _arena_closed(self, event: Mapping[str, Any], scope: _Scope) -> None:
        arena = self._arena(event, scope)
        if arena is not None:
            for metric in (ARENA_RESERVED, ARENA_COMMITTED, ARENA_MEASURED):
                self._pop(metric, (arena, *scope.labels))

    def _cuda_graph(self, event: Mapping[str, Any], scope: _Scope) -> None:
        self._set(CUDA_GRAPH, scope.labels, _number(event.get("mem_usage_bytes")))

    def _mamba(self, event: Mapping[str, Any], scope: _Scope) -> None:
        sizes = [_number(event.get(field)) for field in _MAMBA_FIELDS[:2]]
        extras = [_number(event.get(field)) for field in _MAMBA_FIELDS[2:]]
        if None not in sizes:
            total = sum(size for size in [*sizes, *extras] if size is not None)
            self._set(MAMBA_POOL, (self._named(event, scope, MAMBA_POOL), *scope.labels), total)

    def _host_pool(self, event: Mapping[str, Any], scope: _Scope) -> None:
        size = _number(event.get("host_bytes"))
        if size is not None:
            self._set(HOST_POOL, (self._named(event, scope, HOST_POOL), *scope.labels), size)

    def _named(self, event: Mapping[str, Any], scope: _Scope, metric: Metric) -> str:
        """A host or Mamba pool's name, within the bound: its label, else its order among the run's unnamed ones."""
        position = self._next_position(scope, metric)
        name = _text(event.get("label")) or f"#{position}"
        return self._bounded(scope.instance, "pool", (name, ""), (FOLDED, ""))[0]

    def _state_corrected(self, event: Mapping[str, Any], scope: _Scope) -> None:
        """A pool event's state, corrected: its series as the pool event would have set them, had it said so."""
        state, before = _text(event.get("allocation_state")), _text(event.get("previous_allocation_state"))
        line = json_integer(event.get("corrected_line"))
        if state is None or before is None or line is None:
            return
        if event.get("corrected_event") == "kv_pool.swa_summary":
            total = self._get(KV_POOL_SWA_TOTAL, (before, *scope.labels))
            self._pop(KV_POOL_SWA_TOTAL, (before, *scope.labels))
            self._set(KV_POOL_SWA_TOTAL, (state, *scope.labels), total)
            return
        pool = self._run(scope.run).pools_by_line.get(line)
        size = None if pool is None else self._get(KV_POOL_BYTES, (before, *pool, *scope.labels))
        if pool is None or size is None:
            return
        tokens = self._get(KV_POOL_TOKENS, (*pool, *scope.labels))  # a post-capture line may have set them
        self._pool(pool, state, size, {"num_tokens": tokens, "committed_bytes": event.get("committed_bytes")}, scope)

    def _violation(self, event: Mapping[str, Any], scope: _Scope) -> None:
        self._add(VIOLATIONS, (scope.instance,), 1.0 + (_number(event.get("suppressed")) or 0.0))


def _exported(metric: Metric, key: _Key) -> dict[str, str]:
    """The labels of a series, without those that have no value (see the module's docstring)."""
    return {name: value for name, value in zip(metric.labels, key, strict=True) if value}


def this_process() -> str:
    """The ``server_instance`` of events this process emits live, unless its caller names one: ``host:pid``.

    The Prometheus endpoint and the OpenTelemetry export label the same process alike.
    """
    return f"{socket.gethostname()}:{os.getpid()}"


__all__ = ["METRICS", "MemorySeries", "Metric", "server_of", "this_process"]
