"""Memory over time, per server run and rank: the states ``kvlog plot`` draws, worked out from events.

Old logs printed a KV pool's address-space reservation as if it were memory, so a chart that adds
every pool's size shows a GPU fuller than it was. Here a pool's size counts as memory only when the
event says it is (``allocation_state: allocated``, or ``committed_bytes``); the rest of a
``va_upper_bound`` pool is kept apart, as the address space it is, so that the figure can draw it as
a band that is plainly not memory. Where the state or the committed bytes were inferred by the
migration, the sample carries the inference and the line it rests on, so a reader can check it.

A rank's run starts at ``weights.load_begin`` (as in the migration's per-rank context), or at the steps
sglang prints before it (``RUN_START``: torch distributed's initialisation, the memory baseline), whose
cost is the run's too; runs are kept apart by input file and ranks (events without a file, kvlog's own
JSON already current, by process).
A committed size that a later line stated (sglang's post-capture sizing) takes effect at that line,
not at the pool's: before it, the memory was not committed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from pathlib import PurePath
from typing import Any

from kvlog.migration.context import RankKey, rank_key
from kvlog.schema.event_validator import EventValidator
from kvlog.schema.readings import DEVICE_CONSUMERS, FREE_DEVICE_MEMORY, json_integer, json_number, migrated_line
from kvlog.text.units import byte_figure

#: the fields whose inference changes what a sample counts as memory
INFERRED_FIELDS = ("allocation_state", "committed_bytes")
VA = "va_upper_bound"
#: events stating the weights' size (sglang's is the drop in free memory across the load), and the field:
#: the ledger's weights consumer (``DEVICE_CONSUMERS``), so that the picture and the ledger read the same lines
_WEIGHTS = {reading.event: reading.fields[0] for reading in DEVICE_CONSUMERS if reading.consumer == "weights"}
#: the rule of weights worked out from the free memory a load's begin and end lines printed
WEIGHTS_FROM_FREE_DROP = "load-free-memory-drop"
_POOLS = ("kv_pool.allocation", "kv_pool.unified_allocation", "kv_pool.swa_summary")
#: the events a rank's start-up begins with, in the order sglang prints them: each starts a new run, unless
#: the run holds only the ones printed before it (then it is that run's next step)
RUN_START = ("distributed.initialized", "memory.baseline", "weights.load_begin")
#: the label of the speculative draft's post-capture sizing, which names no pool
_DRAFT = "draft"
#: an arena's bookkeeping events: each states the committed bytes of the arena so far
ARENA_BOOKKEEPING = ("kv_arena.commit", "kv_arena.decommit", "kv_arena.error")
#: the server's statistics line: how full the KV cache was (``kvlog migrate --usage``), not how much memory
USAGE = "kv_pool.usage"


@dataclass(frozen=True)
class Inference:
    """How a field of the event was worked out, and the line that says so."""

    field: str
    rule: str
    evidence: str
    #: ``file:line`` of the line the inference rests on, when it names one
    evidence_at: str | None = None
    #: that line as the log printed it, when the events kept it (``migrate(keep_original=True)``)
    evidence_original: str | None = None


@dataclass(frozen=True)
class Sample:
    """A rank's memory just after one event: what the event measured, and the state it left (bytes)."""

    time: datetime
    event: str
    #: where the event came from: ``file:line`` for a migrated event, else the event's name
    at: str
    #: what the event says, in words (``K+V 73.8 GiB, VA upper bound``)
    says: str
    #: free device memory measured by this event (None: it measured none)
    free: int | None
    #: device memory the weights take (None: unknown, no line stated it yet)
    weights: int | None
    #: physical memory backing the KV pools
    kv_committed: int
    #: address space reserved for KV pools beyond what is committed: an upper bound, not memory
    kv_va_bound: int
    #: address space reserved for KV pools in all (committed or not): the VA upper bounds' sizes
    kv_reserved: int
    #: pinned host memory of hierarchical KV pools (host, not device)
    host: int
    #: the allocation state a pool event states (None: the event is not a pool's)
    state: str | None = None
    #: the share of the device KV pool in use at the run's last usage line, and of a hybrid's SWA pool (None: none yet)
    usage: float | None = None
    swa_usage: float | None = None
    #: the weights are the drop in free memory across their load, not a figure a line stated
    weights_inferred: bool = False
    inferred: tuple[Inference, ...] = ()
    original: str | None = None


@dataclass(frozen=True)
class Timeline:
    """One server run of one rank."""

    source: str
    ranks: str
    #: 1 for the first run of these ranks in ``source``, 2 for the next, ...
    run: int
    samples: tuple[Sample, ...]
    #: KV pools the log printed as allocated that were address-space upper bounds: their size (bytes) ...
    claimed_bytes: int = 0
    #: ... the most of it that was ever committed (their true memory), where the log says; the rest was overstated
    claimed_committed_bytes: int = 0
    #: ... and the size of those whose committed memory no line states (at most this much more was overstated)
    claimed_unknown_bytes: int = 0
    #: the first input line of the run's events, where the run's lines begin (None: events without lines)
    first_line: int | None = None
    #: the run's valid events, in order: what a reader of other figures than the drawn ones reads (``kvlog ledger``)
    events: tuple[Mapping[str, Any], ...] = ()

    @property
    def overstated_bytes(self) -> int:
        """Bytes the log printed as KV memory that were never memory, where it says what was committed."""
        return max(0, self.claimed_bytes - self.claimed_unknown_bytes - self.claimed_committed_bytes)

    @property
    def title(self) -> str:
        """``file · TP0 · run 2 (2026-07-22 14:00:31 UTC)``."""
        start = self.samples[0].time.strftime("%Y-%m-%d %H:%M:%S %Z").rstrip()
        return f"{PurePath(self.source).name} · {self.ranks or 'no rank'} · run {self.run} ({start})"

    @property
    def has_usage(self) -> bool:
        """Whether the run's usage lines were read (drawn as an occupancy panel of their own)."""
        return any(sample.usage is not None for sample in self.samples)

    @property
    def has_memory(self) -> bool:
        """Whether any event of the run said something of its memory (a run of usage lines alone says none)."""
        return any(sample.event != USAGE for sample in self.samples)

    @property
    def has_host(self) -> bool:
        """Whether the run allocated host pools (drawn on an axis of their own)."""
        return any(sample.host for sample in self.samples)


def timelines(
    events: Iterable[dict[str, Any]], on_invalid: Callable[[dict[str, Any]], None] | None = None
) -> list[Timeline]:
    """Every rank's runs in ``events`` (current kvlog events, in the order of their inputs) with a sample each.

    An event the catalog does not validate is left out and handed to ``on_invalid``: ``migrate`` copies
    a current event as it is, so an invalid one reaches here, and what it says cannot be drawn.
    """
    valid = _validator().is_valid
    drawn: list[dict[str, Any]] = []
    for event in events:
        if valid(event):
            drawn.append(event)
        elif on_invalid is not None:
            on_invalid(event)
    lines = _Lines(drawn)  # an invalid event's line number or quote must not stand in for a valid one's
    runs: list[_Run] = []
    current: dict[tuple[str, RankKey], _Run] = {}
    counts: dict[tuple[str, RankKey], int] = {}
    for event in drawn:
        name = event["event"]
        key = (event_source(event), rank_key(event))
        run = current.get(key)
        if run is None or (name in RUN_START and not run.starting_before(name)):
            counts[key] = counts.get(key, 0) + 1
            run = current[key] = _Run(key[0], ranks_label(key[1]), counts[key], lines)
            runs.append(run)
        run.add(name, event)
    return [run.timeline() for run in runs if run.samples]


@cache
def _validator() -> EventValidator:
    """The validator of kvlog's catalog, compiled once: summarize draws a timeline per input."""
    return EventValidator()


def event_source(event: Mapping[str, Any]) -> str:
    """What a timeline names the source of ``event``: its migrated file, else its process, else its kind.

    Runs of different sources never share state, so a caller may feed ``timelines`` each group of
    sources apart (``kvlog summarize`` does, to hold one file's events at a time, not a fleet's).
    """
    migrated = event.get("migrated")
    file = migrated.get("file") if isinstance(migrated, Mapping) else None
    if file is not None:
        return str(file)
    pid = event.get("pid")  # kvlog's own events, and a live handler's (``kvlog integrate``): one process's lines
    if pid is not None:
        number = json_integer(pid)  # 7.0 is process 7
        return f"(events of process {pid if number is None else number})"
    return "(standard input)" if isinstance(migrated, Mapping) else "(events)"


def ranks_label(key: RankKey) -> str:
    """How a timeline names a rank: ``DP0 EP0 TP0`` (tags sorted, as ``rank_key`` sorts them)."""
    return " ".join(f"{tag.upper()}{rank}" for tag, rank in key)


class _Lines:
    """The events of each input by line: when a line's event comes, and what the line said."""

    def __init__(self, events: Sequence[Mapping[str, Any]]) -> None:
        self.originals: dict[tuple[str, int], str] = {}
        self.with_events: set[tuple[str, int]] = set()
        for event in events:
            line = migrated_line(event)
            if line is not None:
                where = (event_source(event), line)
                self.with_events.add(where)
                original = _original(event)
                if original is not None:
                    self.originals[where] = original


@dataclass
class _Pool:
    #: a VA upper bound: ``upper`` bytes of address space, of which ``committed`` are memory
    bound: bool
    upper: int
    committed: int
    arena_ids: tuple[str, ...] = ()
    #: the pool's event stated its own committed bytes (kvlog's live events do; old logs did not)
    stated: bool = False


@dataclass
class _Run:
    source: str
    ranks: str
    number: int
    lines: _Lines
    samples: list[Sample] = field(default_factory=list)
    pools: dict[object, _Pool] = field(default_factory=dict)
    #: committed bytes by arena, as kvlog's arena events keep them
    arenas: dict[str, int] = field(default_factory=dict)
    #: line -> (pool, committed bytes, the pool's line) that take effect when that line's event comes
    pending: dict[int, list[tuple[object, int, int | None]]] = field(default_factory=dict)
    weights: int | None = None
    weights_inferred: bool = False
    #: the free memory ``weights.load_begin`` measured, and its line: the load's drop tells the weights
    load_free: tuple[int, int | None] | None = None
    #: what the run itself inferred from the event being taken in (not the migration): shown on its sample
    noted: tuple[Inference, ...] = ()
    host: int = 0
    #: pools printed as allocated that were upper bounds (their allocation state was inferred): size, peak
    #: backing, and whether a line states what was committed
    claimed: dict[object, tuple[int, int, bool]] = field(default_factory=dict)
    first_line: int | None = None
    events: list[Mapping[str, Any]] = field(default_factory=list)
    usage: float | None = None
    swa_usage: float | None = None

    def starting_before(self, name: str) -> bool:
        """Whether the run holds only start-up steps printed before ``name`` (``RUN_START``): ``name`` continues it."""
        step = RUN_START.index(name)
        return all(event["event"] in RUN_START[:step] for event in self.events)

    def add(self, name: str, event: Mapping[str, Any]) -> None:
        """Take ``event`` into the run's state and sample the state it leaves, if it is about memory."""
        time = _time(event)
        if time is None:  # not a current event (kvlog migrate validates those it writes): nowhere to draw it
            return
        self.events.append(event)
        line = migrated_line(event)
        if self.first_line is None:
            self.first_line = line
        said = []
        for key, committed, pool_line in self.pending.pop(line, []) if line is not None else []:
            pool = self.pools.get(key)
            if pool is not None:  # not given back meanwhile
                pool.committed = committed
                said.append(f"KV memory committed: {byte_figure(committed)} of the VA pool of line {pool_line}")
        self.noted = ()
        change = self._change(name, event, line)
        if change is not None:
            said.append(change)
        free = _bytes(event, FREE_DEVICE_MEMORY[name]) if name in FREE_DEVICE_MEMORY else None
        if free is not None:
            said.append(f"free device memory {byte_figure(free)}")
        if said:
            self.samples.append(self._sample(name, event, time=time, line=line, free=free, says=", ".join(said)))

    def _change(self, name: str, event: Mapping[str, Any], line: int | None) -> str | None:
        """Take what ``event`` changes into the state, and say it (None: it changes nothing drawn)."""
        if name == USAGE:
            self.usage, self.swa_usage = _share(event, "fraction"), _share(event, "swa_fraction")
            swa = "" if self.swa_usage is None else f", sliding-window pool {self.swa_usage:.1%}"
            return f"KV cache {self.usage or 0:.1%} in use{swa}"
        if name in _WEIGHTS:
            return self._weights(name, event, line)
        if name == "weights.load_begin":
            free = _bytes(event, "avail_bytes")
            self.load_free = None if free is None else (free, line)
            return None
        if name in _POOLS:
            return self._pool(name, event, line)
        arena = str(event.get("arena_id"))
        committed = _bytes(event, "committed_bytes")
        if name in ARENA_BOOKKEEPING and committed is not None:
            self.arenas[arena] = committed
            return f"arena {arena}: {byte_figure(committed)} committed"
        if name == "kv_arena.closed":  # its memory and its address space are given back
            self.arenas[arena] = 0
            self.pools = {key: pool for key, pool in self.pools.items() if arena not in pool.arena_ids}
            return f"arena {arena} closed"
        if name in ("kv_pool.sleep", "kv_pool.wake"):
            return self._sleep_or_wake(name, event)
        if name == "kv_pool.post_capture_sized" and event.get("label") == _DRAFT and committed is not None:
            return self._draft_sized(committed, line)
        if name == "kv_pool.extended" and committed is not None:
            self.pools[name] = _Pool(False, 0, committed)
            return f"KV cache extended: {byte_figure(committed)} committed"
        host = _bytes(event, "host_bytes")
        if name == "kv_host_pool.allocation" and host is not None:
            self.host += host
            return f"host pool {event.get('label') or ''} {byte_figure(host)} of pinned host memory".replace("  ", " ")
        return None

    def _weights(self, name: str, event: Mapping[str, Any], line: int | None) -> str | None:
        """The weights a line states; else, for sglang's load lines, the drop in free memory they printed.

        sglang's ``mem usage=`` is that drop; older releases printed only the free memory before and after
        the load. With neither, the weights stay unknown: never 0, which would read as a model of no size.
        """
        stated = _bytes(event, _WEIGHTS[name])
        if stated is not None:
            self.weights, self.weights_inferred = stated, False
            return f"weights {byte_figure(stated)}"
        if name != "weights.load_end" and self.weights is not None:
            return None  # a summary that states them with other memory (vLLM's consumed memory): they stand
        after = _bytes(event, "avail_bytes") if name == "weights.load_end" else None
        if after is None or self.load_free is None or self.load_free[0] < after:
            return "weights unknown: no line states them"
        before, begin = self.load_free
        self.weights, self.weights_inferred = before - after, True
        evidence = f"free device memory fell from {byte_figure(before)} to {byte_figure(after)} across the load"
        at = f"{self.source}:{begin}" if begin is not None else None
        said = self.lines.originals.get((self.source, begin)) if begin is not None else None
        self.noted = (Inference("weights", WEIGHTS_FROM_FREE_DROP, evidence, at, said),)
        return f"weights {byte_figure(self.weights, inferred=True)}"

    def _pool(self, name: str, event: Mapping[str, Any], line: int | None) -> str:
        size = _shaped(event)
        state = event.get("allocation_state")
        committed = _bytes(event, "committed_bytes")
        arena_ids = tuple(str(arena) for arena in event.get("arena_ids") or ())
        pool = (event.get("pool"), event.get("label"), arena_ids) if event.get("pool") is not None else (name, line)
        label = f"{event.get('label')} " if event.get("label") else ""
        if name == "kv_pool.swa_summary":
            # the total of sub-pools already counted: it adds only a committed size they did not state
            if state != VA or any(other.bound and other.stated for other in self.pools.values()):
                return f"hybrid pool total {byte_figure(size)}, {state} (counted in its sub-pools)"
            size = 0
        if state == VA:
            self.pools[pool] = _Pool(True, size, 0, arena_ids)
            if "allocation_state" in _inferred(event) and size:  # the line said allocated; evidence says VA
                self.claimed[pool] = (size, 0, committed is not None)
            later = self._stated_later(event) if committed is not None else None
            if later is not None:
                self.pending.setdefault(later, []).append((pool, committed or 0, line))
                backing = f"{byte_figure(committed)} committed at line {later}"
            else:
                self.pools[pool].committed = committed or 0
                self.pools[pool].stated = committed is not None
                backing = "committed unknown" if committed is None else f"{byte_figure(committed)} committed"
            shown = f"{label}KV {byte_figure(size)}" if size else f"{label}hybrid pool total"
            return f"{shown}: VA upper bound (address space, not memory), {backing}"
        held = committed if committed is not None else size
        self.pools[pool] = _Pool(False, 0, held, arena_ids)
        return f"{label}KV {byte_figure(held)} allocated"

    def _draft_sized(self, committed: int, line: int | None) -> str:
        """The draft's pool after post-capture sizing: the last pool allocated unnamed after the first, or a new one.

        The target's post-capture line reaches its VA pool through the inference ``kvlog migrate`` records;
        the draft's (sglang 0.5.22 on) states its own size and is drawn here, never beside its allocation.
        """
        unnamed = [key for key in self.pools if isinstance(key, tuple) and key[0] == "kv_pool.allocation"]
        draft = unnamed[-1] if unnamed and unnamed[-1] != next(iter(self.pools)) else None
        if draft is None or self.pools[draft].bound:
            draft = ("kv_pool.post_capture_sized", line)
        self.pools[draft] = _Pool(False, 0, committed)
        return f"draft KV {byte_figure(committed)} committed after CUDA-graph capture"

    def _stated_later(self, event: Mapping[str, Any]) -> int | None:
        """The later line whose event states the committed size (it takes effect there), if it is one."""
        inferred = _inferred(event).get("committed_bytes")
        line = json_integer(inferred.get("evidence_line")) if inferred else None
        own = migrated_line(event)
        if line is not None and own is not None and line > own and (self.source, line) in self.lines.with_events:
            return line
        return None

    def _sleep_or_wake(self, name: str, event: Mapping[str, Any]) -> str:
        key = (event.get("pool"), event.get("label"), tuple(str(arena) for arena in event.get("arena_ids") or ()))
        pool = self.pools.get(key)
        change = _bytes(event, "freed_bytes" if name == "kv_pool.sleep" else "restored_bytes") or 0
        if pool is not None and not self._arena_backed(pool):  # arena events already told the change
            pool.committed = max(0, pool.committed + (-change if name == "kv_pool.sleep" else change))
        return f"pool {'slept, freeing' if name == 'kv_pool.sleep' else 'woke, restoring'} {byte_figure(change)}"

    def _arena_backed(self, pool: _Pool) -> bool:
        return any(arena in self.arenas for arena in pool.arena_ids)

    def _backing(self, pool: _Pool) -> int:
        if self._arena_backed(pool):
            return sum(self.arenas.get(arena, 0) for arena in pool.arena_ids)
        return pool.committed

    def _sample(
        self, name: str, event: Mapping[str, Any], *, time: datetime, line: int | None, free: int | None, says: str
    ) -> Sample:
        pools = list(self.pools.values())
        committed = sum(self.arenas.values()) + sum(p.committed for p in pools if not self._arena_backed(p))
        # a hybrid summary (no size of its own) may state what its VA sub-pools committed: it narrows their band
        bounded = [pool for pool in pools if pool.bound]
        va = max(0, sum(pool.upper for pool in bounded) - sum(self._backing(pool) for pool in bounded))
        for key, (size, backed, known) in self.claimed.items():
            if key in self.pools:
                pool = self.pools[key]
                backing = max(backed, min(size, self._backing(pool)))
                self.claimed[key] = (size, backing, known or self._arena_backed(pool))
        return Sample(
            time=time,
            event=name,
            at=f"{self.source}:{line}" if line is not None else name,
            says=says,
            free=free,
            weights=self.weights,
            kv_committed=committed,
            kv_va_bound=va,
            kv_reserved=sum(pool.upper for pool in bounded),
            host=self.host,
            state=str(event.get("allocation_state")) if name in _POOLS else None,
            usage=self.usage,
            swa_usage=self.swa_usage,
            weights_inferred=self.weights_inferred,
            inferred=self._inferences(event) + self.noted,
            original=_original(event),
        )

    def _inferences(self, event: Mapping[str, Any]) -> tuple[Inference, ...]:
        found = []
        for name, inference in _inferred(event).items():
            if name not in INFERRED_FIELDS or not isinstance(inference, Mapping):
                continue
            line = json_integer(inference.get("evidence_line"))  # 3.0 is line 3
            at = f"{self.source}:{line}" if line is not None else None
            original = self.lines.originals.get((self.source, line)) if line is not None else None
            found.append(Inference(name, str(inference.get("rule")), str(inference.get("evidence")), at, original))
        return tuple(found)

    def timeline(self) -> Timeline:
        claimed = self.claimed.values()
        return Timeline(
            self.source,
            self.ranks,
            self.number,
            tuple(self.samples),
            claimed_bytes=sum(size for size, _, _ in claimed),
            claimed_committed_bytes=sum(backed for _, backed, known in claimed if known),
            claimed_unknown_bytes=sum(size for size, _, known in claimed if not known),
            first_line=self.first_line,
            events=tuple(self.events),
        )


def _time(event: Mapping[str, Any]) -> datetime | None:
    try:
        return datetime.fromisoformat(str(event.get("timestamp")))
    except ValueError:
        return None


def _inferred(event: Mapping[str, Any]) -> Mapping[str, Any]:
    migrated = event.get("migrated")
    inferred = migrated.get("inferred") if isinstance(migrated, Mapping) else None
    return inferred if isinstance(inferred, Mapping) else {}


def _original(event: Mapping[str, Any]) -> str | None:
    migrated = event.get("migrated")
    original = migrated.get("original") if isinstance(migrated, Mapping) else None
    return original if isinstance(original, str) else None


def _share(event: Mapping[str, Any], name: str) -> float | None:
    value = event.get(name)
    return float(value) if json_number(value) else None


def _bytes(event: Mapping[str, Any], name: str) -> int | None:
    return json_integer(event.get(name))  # 5.0 is 5 bytes to the schema that accepted it


def _shaped(event: Mapping[str, Any]) -> int:
    """A pool's size as shaped: K + V, the one KV buffer (MLA), or a total."""
    parts = [_bytes(event, name) for name in ("k_bytes", "v_bytes", "kv_bytes", "total_bytes")]
    return sum(part for part in parts if part is not None)
