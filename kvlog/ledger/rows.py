"""The rows of a memory ledger: per server run and rank, each figure with its rounding and the line that states it.

The question operators ask in the servers' threads is "the KV cache is smaller than expected: where did
the memory go?", and every answer is assembled by hand from the start-up's lines. A row assembles it:
the device's total, what each consumer of device memory holds (``DEVICE_CONSUMERS``), the KV memory
committed and, apart, the address space KV pools reserved (never memory), the free memory at the end
of start-up, and what is left: ``unaccounted = total - consumers - KV committed - free``.

A figure a log printed rounded (``12.02 GiB``) is the value of a range; the migration records the range's
half-width per field (``migrated.uncertainty_bytes``), so each figure carries it, and a sum carries the
sum of its parts'. A figure no line states is None, never 0: a model of no weights is a different
statement from a log that did not say. The run, its KV state and its free memory are the timeline's
(``kvlog.plot.timeline``), the same as ``kvlog plot`` and ``kvlog summarize`` show.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kvlog.plot.timeline import VA, Sample, Timeline
from kvlog.schema.readings import (
    BEFORE_LOAD,
    DEVICE_CONSUMERS,
    DEVICE_TOTAL,
    FREE_DEVICE_MEMORY,
    KV_SET_ASIDE,
    MEMORY_BUDGET,
    POOL_SIZE_FIELDS,
    json_integer,
    migrated_line,
)

#: every consumer a row names, in the table's order (one that no line of a run states is None there)
CONSUMERS: tuple[str, ...] = tuple(dict.fromkeys(reading.consumer for reading in DEVICE_CONSUMERS))
#: the events whose sizes are KV pools, and the events that state memory committed to a pool later
_POOLS = ("kv_pool.allocation", "kv_pool.unified_allocation", "kv_pool.swa_summary")
_COMMITS = ("kv_pool.post_capture_sized", "kv_pool.extended")
_POOL_FIELDS = tuple(dict.fromkeys(name for names in POOL_SIZE_FIELDS for name in names))


@dataclass(frozen=True)
class Figure:
    """A byte count a log states, the half-width of what its printed rounding hides, and the lines it rests on."""

    value: int | None
    uncertainty: int = 0
    #: ``file:line`` of each line the figure is read (or summed) from (an event of no line: ``source:event``)
    evidence: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        return self.value is not None


UNKNOWN = Figure(None)


@dataclass(frozen=True)
class LedgerRow:
    """One rank's server run: where its device memory went."""

    source: str
    ranks: str
    run: int
    #: when the run's first memory event was (RFC 3339)
    start: str
    device_total: Figure
    #: each consumer of ``CONSUMERS``, in that order
    consumers: tuple[tuple[str, Figure], ...]
    kv_committed: Figure
    #: the address space KV pools reserved (committed or not): an upper bound, never added to memory
    kv_va_upper_bound: Figure
    free: Figure
    #: pinned host memory of hierarchical KV pools: host memory, not the device's
    host_kv: Figure
    #: what the engine may use in all (vLLM's total times its utilization), where a line states it
    budget: Figure
    #: the most device memory the run could hold: the total, else the free memory before its load
    ceiling: Figure
    #: total - consumers - KV committed - free (None: the total or the free memory is unknown)
    unaccounted: Figure
    #: what an operator must look at (``kvlog.ledger.flags``)
    flags: tuple[str, ...] = field(default=())

    def consumer(self, name: str) -> Figure:
        return dict(self.consumers)[name]


def ledger_rows(timelines: Iterable[Timeline]) -> list[LedgerRow]:
    """A row per timeline (``kvlog.plot.timeline.timelines``), without flags (``kvlog.ledger.flags.flagged``)."""
    return [_row(timeline) for timeline in timelines]


def _row(timeline: Timeline) -> LedgerRow:
    source = timeline.source
    events = list(timeline.events)
    end = _end_of_start_up(events)
    upto = events[: end + 1] if end is not None else events
    sample = _end_sample(timeline.samples)
    consumers = {name: _consumer(source, name, events) for name in CONSUMERS}
    if not consumers["weights"].known and sample.weights_inferred and sample.weights is not None:
        consumers["weights"] = _inferred_weights(source, sample, events)
    free = _figure(source, events[end], FREE_DEVICE_MEMORY[events[end]["event"]]) if end is not None else UNKNOWN
    total = _last(source, events, DEVICE_TOTAL)
    kv = _kv_committed(source, upto, sample)
    known = [figure for figure in consumers.values() if figure.known]
    unaccounted = UNKNOWN
    if total.known and free.known:
        parts = [*known, *([kv] if kv.known else []), free]
        value = _value(total) - sum(_value(part) for part in parts)
        unaccounted = Figure(value, total.uncertainty + sum(part.uncertainty for part in parts), _lines(total, *parts))
    start = _last(source, events, BEFORE_LOAD)
    return LedgerRow(
        source=source,
        ranks=timeline.ranks,
        run=timeline.run,
        start=timeline.samples[0].time.isoformat().replace("+00:00", "Z"),
        device_total=total,
        consumers=tuple(consumers.items()),
        kv_committed=kv,
        kv_va_upper_bound=_va(source, upto, sample),
        free=free,
        host_kv=_host(source, upto, sample),
        budget=_last(source, events, MEMORY_BUDGET),
        ceiling=total if total.known else start,
        unaccounted=unaccounted,
    )


def _end_of_start_up(events: list[Mapping[str, Any]]) -> int | None:
    """The index of the run's last event that measures free device memory: where its start-up ended.

    The free memory before the weights load is where the start-up began, not where it ended.
    """
    found = None
    for index, event in enumerate(events):
        name = event["event"]
        if (
            name in FREE_DEVICE_MEMORY
            and name not in BEFORE_LOAD
            and json_integer(event.get(FREE_DEVICE_MEMORY[name])) is not None
        ):
            found = index
    return found


def _end_sample(samples: tuple[Sample, ...]) -> Sample:
    """The sample of that event (each free-memory measurement has one), else the run's last."""
    measured = [sample for sample in samples if sample.free is not None and sample.event not in BEFORE_LOAD]
    return measured[-1] if measured else samples[-1]


def _consumer(source: str, consumer: str, events: list[Mapping[str, Any]]) -> Figure:
    """What the run's lines state ``consumer`` holds: the last statement, or the sum of each (a pool each)."""
    readings = [reading for reading in DEVICE_CONSUMERS if reading.consumer == consumer]
    stated: list[Figure] = []
    for event in events:
        reading = next((reading for reading in readings if reading.states(event)), None)
        if reading is None:
            continue
        parts = [_figure(source, event, name) for name in reading.fields]
        parts = [part for part in parts if part.known]
        if not parts:
            continue
        figure = _summed(parts)
        stated = [*stated, figure] if reading.adds else [figure]
    return _summed(stated) if stated else UNKNOWN


def _inferred_weights(source: str, sample: Sample, events: list[Mapping[str, Any]]) -> Figure:
    """The weights of an sglang log that printed no ``mem usage``: the timeline's drop in free memory across the load.

    Its rounding is that of both free figures, and its lines are theirs.
    """
    ends = [event for event in events if event["event"] == "weights.load_end" and event.get("avail_bytes") is not None]
    after = _figure(source, ends[-1], "avail_bytes") if ends else UNKNOWN
    starts = [event for event in events if event["event"] == "weights.load_begin"]
    before = _figure(source, starts[-1], "avail_bytes") if starts else UNKNOWN
    return Figure(sample.weights, before.uncertainty + after.uncertainty, _lines(before, after))


def _kv_committed(source: str, events: list[Mapping[str, Any]], sample: Sample) -> Figure:
    """The KV memory committed at the end of start-up (the timeline's), with the pool lines it rests on.

    A log that prints no pool (vLLM) states the memory it set aside for the KV cache, which the engine
    allocates at once: that is the KV memory then. None when no line says either.
    """
    stated: list[Figure] = []
    arenas: dict[object, Figure] = {}  # an arena's events state its committed bytes so far: the last says them
    for event in events:
        name = event["event"]
        if name.startswith("kv_arena."):
            committed = _figure(source, event, "committed_bytes")
            arenas[event.get("arena_id")] = committed if committed.known else arenas.get(event.get("arena_id"), UNKNOWN)
            continue
        if name in _POOLS:
            if name == "kv_pool.swa_summary" and event.get("allocation_state") != VA:
                continue  # the total of sub-pools already counted
            fields = ("committed_bytes",) if event.get("allocation_state") == VA else (*_POOL_FIELDS, "committed_bytes")
        elif name in _COMMITS:
            fields = ("committed_bytes",)
        else:
            continue
        stated.extend(figure for figure in (_figure(source, event, field) for field in fields) if figure.known)
    stated.extend(figure for figure in arenas.values() if figure.known)
    if stated:
        summed = _summed(stated)
        return Figure(sample.kv_committed, summed.uncertainty, summed.evidence)
    set_aside = _last(source, events, KV_SET_ASIDE)
    return set_aside if set_aside.known else UNKNOWN


def _va(source: str, events: list[Mapping[str, Any]], sample: Sample) -> Figure:
    """The address space the run's VA-upper-bound pools reserved (None: none of its pools was one)."""
    bounds = [event for event in events if event["event"] in _POOLS and event.get("allocation_state") == VA]
    if not bounds:
        return UNKNOWN
    parts = [_figure(source, event, name) for event in bounds for name in _POOL_FIELDS]
    summed = _summed([part for part in parts if part.known] or [Figure(0)])
    return Figure(sample.kv_reserved, summed.uncertainty, summed.evidence)


def _host(source: str, events: list[Mapping[str, Any]], sample: Sample) -> Figure:
    parts = [_figure(source, event, "host_bytes") for event in events if event["event"] == "kv_host_pool.allocation"]
    known = _summed([part for part in parts if part.known])
    return Figure(sample.host, known.uncertainty, known.evidence) if known.evidence else UNKNOWN


def _last(source: str, events: list[Mapping[str, Any]], readings: Mapping[str, str]) -> Figure:
    """The last figure any of ``readings`` (event -> field) states in the run."""
    found = UNKNOWN
    for event in events:
        name = event["event"]
        if name in readings:
            figure = _figure(source, event, readings[name])
            found = figure if figure.known else found
    return found


def _figure(source: str, event: Mapping[str, Any], name: str) -> Figure:
    """``event``'s field ``name`` as a figure: its value, its printed rounding (as migrated) and its line."""
    value = json_integer(event.get(name))
    if value is None:
        return UNKNOWN
    migrated = event.get("migrated")
    rounding = migrated.get("uncertainty_bytes") if isinstance(migrated, Mapping) else None
    half = json_integer(rounding.get(name)) if isinstance(rounding, Mapping) else None
    line = migrated_line(event)
    at = f"{source}:{line if line is not None else event['event']}"  # kvlog's own events have no line: their name
    return Figure(value, half or 0, (at,))


def _summed(parts: list[Figure]) -> Figure:
    return Figure(sum(_value(part) for part in parts), sum(part.uncertainty for part in parts), _lines(*parts))


def _value(figure: Figure) -> int:
    return figure.value or 0


def _lines(*figures: Figure) -> tuple[str, ...]:
    return tuple(dict.fromkeys(line for figure in figures for line in figure.evidence))
