"""Per-rank context: what a line alone cannot say, told by the lines around it on the same rank and run.

Between the introduction of post-capture sizing (2026-07) and sglang's wording fix (2026-08-05), a
pool living in a virtual-address reservation was printed as ``KV Cache is allocated``. Such a line
can be told apart only by context: a ``KvVmmArena[...] ready`` line earlier on the same rank in the
same run (one arena per pool, so each arena explains one pool line; speculative draft pools, printed
after, never use the VA path and stay allocated), or, where no arena line was printed, a *later*
``Post-capture KV sizing:`` line of any wording (sglang 0.5.16 to today). The post-capture line that
states what was committed (``KV cache allocated. … KV size: X GB``, 0.5.17 on; ``draft KV cache
allocated. …`` for each speculative draft pool, 0.5.22 on) also gives the pool group its committed
bytes, so a pool known to be a VA upper bound is held back until that line (or the end of its run).
Older logs print the KV-cache dtype on a separate line. A rank's
run starts at ``Load weight begin`` on that rank; ``server_args=`` (printed by the main process)
starts a run for every rank of the file. Once a run shows today's wording (``reserved_va=``,
``VA upper bound``), ``is allocated`` in it means allocated: the state is read, not inferred.

The scheduler's ``max_total_num_tokens=…`` line (``scheduler.limits``) ends a rank's start-up. Every
release prints it once per run, after the KV pools (on every rank up to 0.4.6.post3, on TP rank 0
only since), and from 0.5.16 after ``Scheduler.init_model_worker`` has run the post-capture resize in
the same process, whose lines (committed bytes included) ``compute_post_capture_kv_resize`` prints.
So at that line nothing still waiting on its rank can learn more: a server older than post-capture
sizing, which never prints such a line, is not waited on until its run ends.

The main process's ``The server is fired up and ready to roll!`` (the same words since 0.2.5) ends the
start-up of every rank of the file's run; the order was checked from 0.3.6.post3 to 0.5.23.
``http_server._wait_and_warmup`` prints it once the HTTP server runs, which ``Engine._launch_subprocesses``
(``launch_engine`` before 0.4.3) allows only after every local scheduler, or the data-parallel
controller once all of its schedulers did, sent ``ready`` on its pipe; ``run_scheduler_process``
sends that after ``Scheduler(...)`` is built, and the post-capture resize runs inside it
(``Scheduler.init_model_worker``). Since only TP rank 0 prints the limits line, it is the line that
ends the wait of the other ranks. When warmup fails it is not printed, and the pools wait as before.
Of a multi-node server only the first node prints it, once its own schedulers are ready (the other
nodes' logs never show it): one file is one node's log, as ``server_args=`` already assumes.

A pool larger than the device memory its rank stated in the same run cannot be allocated: it is a VA
upper bound, whatever its line claims (``device-memory-bound``). The figures that bound it are the free
memory at ``Load weight begin`` (the run has allocated nothing yet) and a device's total
(``kvlog.schema.readings.DEVICE_MEMORY``); the smallest one stated counts, and only if the pool exceeds
it even with both printed figures rounded against the rule. The line comes before the pools, so the
state is decided as the pool is read: a follower never publishes such a pool as allocated.

Only events this migration produced are revised, and each revision is recorded in
``migrated.inferred`` with its rule and the line it rests on. Events that waited for a later line
are released when the evidence comes, when their run ends, or after a bounded look-ahead. Evidence
that comes after the look-ahead gave up on a pool (a post-capture line later than ``--hold`` in a
live log) can no longer revise it, as it was written: it makes a ``kv_pool.state_corrected`` event
instead (``take_corrections``), naming the pool's event by its line, the state that holds, and the rule.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from kvlog.envelope import InferenceRule, envelope
from kvlog.migration.ops import inferred, mark_inferred
from kvlog.schema.readings import DEVICE_MEMORY, json_integer, pool_size_fields

POOL = "kv_pool.allocation"
SUMMARY = "kv_pool.swa_summary"
ARENA = "kv_arena.ready"
RUN_START = "weights.load_begin"
POST_CAPTURE = "kv_pool.post_capture_sized"
START_UP_END = "scheduler.limits"
UNIFIED = "kv_pool.unified_allocation"
COMMITTED = "committed_bytes"
STATE = "allocation_state"
VA = "va_upper_bound"
CORRECTION = "kv_pool.state_corrected"
#: the version of ``CORRECTION`` the context builds: its newest (a test holds the two together)
CORRECTION_VERSION = 1

#: (tag, rank) pairs, each rank as read: an invalid event may give one that is not an int
RankKey = tuple[tuple[str, object], ...]


@dataclass(slots=True)
class Held:
    """An event on its way out: ``resolved`` is False while it waits for evidence from a later line.

    It can be written once it is ``resolved`` and no longer ``waits_for_time`` (the engine asks so inline,
    once per event: no property call).
    """

    event: dict[str, Any]
    line: int
    revisable: bool
    raw: bytes = b""
    resolved: bool = True
    glue: tuple[str, str] = ("", "")
    keep_raw: bool = False
    #: the wording or format the event was read from ("": its ``migrated.source_format`` says)
    source: str = ""
    #: the version of the event the line said (None: an event no line stands for)
    source_version: int | None = None
    #: no time on its line nor on any before it: it waits for the next line that has one (``kvlog.migration.dating``)
    waits_for_time: bool = False
    #: the text rule (``kvlog.migration.grammar.Rule``) the migrator built it from, off a printed line: valid by
    #: construction once one event of that rule with its keys was (``kvlog.migration.engine.FileRun._record``)
    built: object = None


@dataclass(frozen=True)
class Evidence:
    """A line that supports an inference, as cited in provenance."""

    line: int
    text: str


@dataclass(frozen=True)
class _Device:
    """The least device memory a rank stated in its run: no pool of the run can hold more."""

    bytes: int
    #: half the rounding step of the printed figure (``migrated.uncertainty_bytes``)
    spread: int
    evidence: Evidence


@dataclass(slots=True)
class _Run:
    arenas: deque[Evidence] = field(default_factory=deque)
    arena_seen: bool = False
    post_capture_seen: bool = False
    #: the scheduler's limits line or the server's ready line came: no post-capture line follows it in this run
    started: bool = False
    todays_wording: bool = False
    dtype: tuple[str, Evidence] | None = None
    va_pools: list[Evidence] = field(default_factory=list)
    #: pools whose state a later line may still tell
    waiting: list[Held] = field(default_factory=list)
    #: VA pools held for the committed bytes a later post-capture line states, oldest group first
    uncommitted: list[Held] = field(default_factory=list)
    #: the target's committed line came: a ``draft`` one now speaks of the next group
    target_committed: bool = False
    device: _Device | None = None
    #: a pool of the run was told a VA bound by the device memory: the pools after it are drafts, allocated
    device_bound_seen: bool = False
    #: pools written as their line claimed when the look-ahead ran out: a later post-capture line corrects them
    given_up: list[Held] = field(default_factory=list)


def rank_key(event: dict[str, Any]) -> RankKey:
    """The rank an event belongs to (main-process lines: the empty key)."""
    ranks = event.get("ranks")
    if not isinstance(ranks, dict):
        return ()
    for rank in ranks.values():  # a loop, not any(): no generator made for each event
        if type(rank) is not int:  # 1.0 is rank 1; true is no rank, though True == 1
            ranks = {tag: _rank(rank) for tag, rank in ranks.items()}
            break
    key = tuple(sorted(ranks.items())) if len(ranks) > 1 else tuple(ranks.items())  # one rank: already in order
    try:
        hash(key)
    except TypeError:  # a rank that is a list or an object (an invalid event): the ranks as written are its key
        return (("", repr(ranks)),)
    return key


def _rank(value: object) -> object:
    """A rank as JSON means it: the integer a number is, a boolean kept apart from 0 and 1, else as written."""
    number = json_integer(value)
    if number is not None:
        return number
    return (bool, value) if isinstance(value, bool) else value


class Context:
    """The context of one input file."""

    def __init__(self) -> None:
        self._runs: dict[RankKey, _Run] = {}
        #: ``kv_pool.state_corrected`` events made since the caller last took them (``take_corrections``): the
        #: caller reads it to skip the call on the lines that made none (nearly all)
        self.corrections: list[dict[str, Any]] = []

    def take_corrections(self) -> list[dict[str, Any]]:
        """The corrections of events already written that the last line made, to be written after its own event."""
        made, self.corrections = self.corrections, []
        return made

    def start_all_runs(self) -> None:
        """``server_args=``: a new server run for every rank."""
        for run in self._runs.values():
            _release(run)
        self._runs.clear()

    def kv_dtype(self, key: RankKey, dtype: str, line: int) -> None:
        """An older log's ``Using KV cache dtype:`` line."""
        self._run(key).dtype = (dtype, Evidence(line, f"Using KV cache dtype: {dtype}"))

    def finish(self) -> None:
        """End of input: whatever still waits has no further evidence coming."""
        self.start_all_runs()

    def give_up(self, held: Held, bound: str) -> None:
        """The look-ahead (``bound``, e.g. "100000 lines") is exhausted for ``held``: it keeps what it has.

        What the missing evidence would have told is recorded under the look-ahead rule: a pool whose
        state no later line settled keeps the state its line claimed, and a VA pool whose committed
        bytes no post-capture line stated keeps ``committed_bytes`` unknown.
        """
        rule = InferenceRule.LOOKAHEAD_EXHAUSTED
        for run in self._runs.values():
            if held in run.waiting:
                run.waiting.remove(held)
                run.given_up.append(held)
                claimed = held.event.get(STATE)
                evidence = f"no later line on the same rank and run told more within {bound}; the line claims {claimed}"
                mark_inferred(held.event, STATE, rule, evidence)
            if held in run.uncommitted:
                run.uncommitted.remove(held)
                evidence = f"no later post-capture line on the same rank and run stated them within {bound}"
                mark_inferred(held.event, COMMITTED, rule, evidence)
        held.resolved = True

    def post_capture_note(self, key: RankKey, line: int, timestamp: str | None) -> None:
        """A post-capture line that is not an event (a warning, the resized token split): evidence only."""
        self._evidence(self._run(key), line, timestamp)

    def start_up_end(self, line: int) -> None:
        """The server's ready line: every post-capture line of every rank of the run came before it."""
        for run in self._runs.values():
            self._start_up_end(run, line, "the server's ready line (The server is fired up and ready to roll!)")

    def observe(self, held: Held, source_version: int) -> None:
        """Learn from an event, and revise it if this migration produced it and the context says more."""
        event = held.event
        name, key = event.get("event"), rank_key(event)
        if name == RUN_START:
            ended = self._runs.pop(key, None)
            if ended is not None:
                _release(ended)
            self._runs[key] = _Run()
        elif name == ARENA:
            run = self._run(key)
            run.arena_seen = True
            run.todays_wording |= source_version >= 2
            arena_bytes = event.get("reserved_va_bytes", event.get("reserved_bytes"))
            text = f"KvVmmArena[{event.get('arena_id')}] ready, {arena_bytes} bytes of address space reserved"
            run.arenas.append(Evidence(held.line, text))
        elif name == POST_CAPTURE:
            self._post_capture(self._run(key), held)
        elif name == START_UP_END:
            self._start_up_end(self._run(key), held.line, "the scheduler's max_total_num_tokens line")
        elif name in (POOL, UNIFIED):
            self._pool(self._run(key), held, source_version)
        elif name == SUMMARY:
            self._summary(self._run(key), held, source_version)
        if name in DEVICE_MEMORY:
            self._device(self._run(key), held)

    def _device(self, run: _Run, held: Held) -> None:
        """A line stating the rank's device memory: the run's bound, if lower than what it stated before."""
        event = held.event
        name = str(event.get("event"))
        figure = json_integer(event.get(DEVICE_MEMORY[name]))
        if figure is None:
            return
        spread = _spread(event, (DEVICE_MEMORY[name],))
        if run.device is None or figure + spread < run.device.bytes + run.device.spread:
            text = f"{name} states {figure} bytes of device memory ({DEVICE_MEMORY[name]}) on the same rank and run"
            run.device = _Device(figure, spread, Evidence(held.line, text))

    def _beyond_device(self, run: _Run, held: Held) -> bool:
        """Whether the pool of ``held`` exceeds its run's device memory: if so it is told a VA bound here."""
        device, event = run.device, held.event
        if device is None:  # nearly every run: no line stated the device memory, so no pool is told by it
            return False
        names = pool_size_fields(event)
        if names is None:
            return False
        size = sum(json_integer(event[name]) or 0 for name in names)
        if size - _spread(event, names) <= device.bytes + device.spread:
            return False
        evidence = f"the pool's {size} bytes cannot be allocated: {device.evidence.text}"
        _mark_va(event, InferenceRule.DEVICE_MEMORY_BOUND, evidence, device.evidence.line)
        run.device_bound_seen = True
        return True

    def _run(self, key: RankKey) -> _Run:
        run = self._runs.get(key)
        if run is None:
            run = self._runs[key] = _Run()
        return run

    def _pool(self, run: _Run, held: Held, source_version: int) -> None:
        event = held.event
        if held.revisable and event.get("dtype") is None and run.dtype is not None:
            dtype, evidence = run.dtype
            event["dtype"] = dtype
            mark_inferred(event, "dtype", InferenceRule.KV_CACHE_DTYPE_LINE, evidence.text, evidence.line)
        if not _state_inferred(event) or not held.revisable:
            run.todays_wording |= _says_va(event, source_version)
            if event.get(STATE) == VA:
                if run.arenas and event.get("event") == POOL:
                    run.arenas.popleft()
                run.va_pools.append(Evidence(held.line, "a sub-pool of this run is a VA upper bound"))
                self._await_committed(run, held)
            return
        if run.todays_wording:
            _read_from_line(event)
        elif run.arenas:
            arena = run.arenas[0] if event.get("event") == UNIFIED else run.arenas.popleft()
            evidence_text = f"{arena.text} on the same rank and run"
            _mark_va(event, InferenceRule.ARENA_BEFORE_POOL, evidence_text, arena.line)
            run.va_pools.append(
                Evidence(held.line, f"a sub-pool of this run is a VA upper bound (arena line {arena.line})")
            )
            self._await_committed(run, held)
        elif self._beyond_device(run, held):
            run.va_pools.append(
                Evidence(held.line, f"a sub-pool of this run is a VA upper bound (its size, line {held.line})")
            )
            self._await_committed(run, held)
            self._bound_group(run, held)
        elif event.get("label") is not None and run.device_bound_seen and run.va_pools:
            evidence = run.va_pools[0]  # a later sub-pool of the group a sub-pool's size told
            _mark_va(event, InferenceRule.SUB_POOLS_ARE_VA_BOUND, evidence.text, evidence.line)
            self._await_committed(run, held)
        elif _may_learn_more(run):
            held.resolved = False
            run.waiting.append(held)

    def _summary(self, run: _Run, held: Held, source_version: int) -> None:
        event = held.event
        if not _state_inferred(event) or not held.revisable:
            run.todays_wording |= source_version >= 2 and event.get(STATE) == VA
            run.va_pools.clear()
            if event.get(STATE) == VA:
                self._await_committed(run, held)
            return
        if run.todays_wording:
            _read_from_line(event)
        elif run.va_pools or run.arenas:
            evidence = run.va_pools[0] if run.va_pools else run.arenas[0]
            _mark_va(event, InferenceRule.SUB_POOLS_ARE_VA_BOUND, evidence.text, evidence.line)
            self._await_committed(run, held)
        elif self._beyond_device(run, held):
            self._await_committed(run, held)
            self._bound_group(run, held)
        elif _may_learn_more(run):
            held.resolved = False
            run.waiting.append(held)
        run.va_pools.clear()

    def _bound_group(self, run: _Run, held: Held) -> None:
        """The sub-pools still waiting of a group one of whose pools is too large for the device: VA bounds too.

        sglang sizes a whole group (a hybrid pool's sub-pools and its summary) before capture, as the
        post-capture line tells of the whole group.
        """
        evidence = f"a pool of the same group (line {held.line}) is larger than the device memory of the rank and run"
        for sibling in [waiting for waiting in run.waiting if waiting.event.get("label") is not None]:
            run.waiting.remove(sibling)
            _mark_va(sibling.event, InferenceRule.SUB_POOLS_ARE_VA_BOUND, evidence, held.line)
            sibling.resolved = True
            self._await_committed(run, sibling)

    def _await_committed(self, run: _Run, held: Held) -> None:
        """A VA pool of this migration's: held until a post-capture line states what it commits.

        Absent is unknown as null is: the hybrid summary's ``committed_bytes`` is optional, and no line
        before the committed one prints it. Skipping an absent one left a group behind an arena line with
        its sub-pools alone, whose total no single pool owns, so the committed figure was dropped.
        """
        if held.revisable and held.event.get(COMMITTED) is None:
            held.resolved = False
            run.uncommitted.append(held)

    def _evidence(self, run: _Run, line: int, timestamp: str | None, committed: int | None = None) -> None:
        """A post-capture line: the first pool group still waiting was sized before capture.

        The group is the first pool printed (or hybrid sub-pools and their summary): VA upper bounds,
        now held for their committed bytes. Pools printed after it (speculative drafts before sglang
        0.5.22, which never used the VA path) are real allocations. Where the look-ahead gave up on
        the first group, it was written as allocated: it is corrected (with the ``committed`` bytes
        the line states, for the event that owns the group's total), and what waits after it is a draft.
        """
        pending = [*run.given_up, *run.waiting]  # the look-ahead gives up on the oldest first
        if pending:
            group = _group(pending)
            owner = _committed_owner(group)
            for held in group:
                if held in run.given_up:
                    stated = committed if held is owner else None
                    when = timestamp or held.event.get("timestamp")
                    self.corrections.append(_correction(held, line, when, stated))
                    continue
                evidence = "a later Post-capture KV sizing line on the same rank and run"
                _mark_va(held.event, InferenceRule.POST_CAPTURE_AFTER_POOL, evidence, line)
                run.uncommitted.append(held)
                run.waiting.remove(held)
        run.given_up.clear()
        run.post_capture_seen = True
        _release_all(run.waiting)

    def _start_up_end(self, run: _Run, line: int, end: str) -> None:
        """A line printed after every post-capture line of this rank and run (``end`` names it).

        A pool still waiting keeps the state its line claimed, under the rule that read the claim, as at
        the end of its run: it is what every server older than post-capture sizing prints. A VA pool
        still waiting for its committed bytes missed a line the order says came before: they stay
        unknown, and the rule says which line settled that.
        """
        for held in run.uncommitted:
            evidence = (
                f"no Post-capture KV sizing line on the same rank and run stated them before {end}, "
                "which sglang prints after them"
            )
            mark_inferred(held.event, COMMITTED, InferenceRule.NO_POST_CAPTURE_BEFORE_START_UP_END, evidence, line)
        _release(run)
        run.given_up.clear()
        run.started = True

    def _post_capture(self, run: _Run, held: Held) -> None:
        """A post-capture event: evidence, and the committed bytes of the group it speaks of."""
        event = held.event
        committed = event.get(COMMITTED)
        stated = json_integer(committed) if event.get("label") is None else None  # a draft's line: not the target's
        self._evidence(run, held.line, event.get("timestamp"), stated)
        if committed is None:  # sglang 0.5.16 said no more than this: nothing further will come
            _release_all(run.uncommitted)
            return
        is_draft = event.get("label") is not None
        if is_draft and not run.target_committed:
            return  # the target's line is missing: which group a draft line speaks of is unknown
        run.target_committed = True
        if not run.uncommitted:
            return
        group = _group(run.uncommitted)
        owner = _committed_owner(group)
        if owner is not None:
            owner.event[COMMITTED] = committed
            line_text = "a later Post-capture KV sizing line on the same rank and run states the committed KV size"
            mark_inferred(owner.event, COMMITTED, InferenceRule.POST_CAPTURE_COMMITTED, line_text, held.line)
            spread = event.get("migrated", {}).get("uncertainty_bytes", {}).get(COMMITTED)
            if spread:
                owner.event["migrated"].setdefault("uncertainty_bytes", {})[COMMITTED] = spread
        for member in group:
            run.uncommitted.remove(member)
        _release_all(group)


def _may_learn_more(run: _Run) -> bool:
    """Whether a later line of the run may still tell that a pool claiming allocation is a VA bound."""
    return not (run.arena_seen or run.post_capture_seen or run.started or run.device_bound_seen)


def _spread(event: dict[str, Any], names: tuple[str, ...]) -> int:
    """How far the true sum of the figures ``names`` may lie from the printed one (their rounding)."""
    migrated = event.get("migrated")
    spreads = migrated.get("uncertainty_bytes") if isinstance(migrated, dict) else None
    if not isinstance(spreads, dict):
        return 0
    return sum(json_integer(spreads.get(name)) or 0 for name in names)


def _correction(held: Held, line: int, timestamp: Any, committed: int | None) -> dict[str, Any]:
    """The ``kv_pool.state_corrected`` of a pool event already written that the post-capture ``line`` tells a VA bound.

    It names the corrected event as that event names itself (its ``migrated.line`` in its file, its ranks,
    pool and label) and records the rule and the evidence in ``migrated.inferred``, as a revision would.
    """
    corrected = held.event
    migrated = corrected.get("migrated")
    provenance: dict[str, Any] = migrated if isinstance(migrated, dict) else {}
    event = envelope(CORRECTION, CORRECTION_VERSION, timestamp, "info", corrected.get("pid"), corrected.get("ranks"))
    event["corrected_event"] = corrected.get("event")
    event["corrected_line"] = provenance.get("line", held.line)
    event["pool"], event["label"] = corrected.get("pool"), corrected.get("label")
    event["allocation_state"], event["previous_allocation_state"] = VA, corrected.get(STATE)
    event[COMMITTED] = committed
    event["migrated"] = {"source_format": provenance.get("source_format"), "file": provenance.get("file"), "line": line}
    evidence = "a later Post-capture KV sizing line on the same rank and run, after the look-ahead was exhausted"
    mark_inferred(event, STATE, InferenceRule.POST_CAPTURE_AFTER_POOL, evidence, line)
    return event


def _group(helds: list[Held]) -> list[Held]:
    """The first pool group of ``helds``: one pool, or labelled sub-pools with their summary and unified total."""
    first = helds[0].event
    group = [helds[0]]
    if first.get("label") is not None or first.get("event") in (SUMMARY, UNIFIED):
        for held in helds[1:]:
            if held.event.get("event") in (SUMMARY, UNIFIED) or held.event.get("label") is not None:
                group.append(held)
            else:
                break
    return group


def _committed_owner(group: list[Held]) -> Held | None:
    """The event of a group whose total the committed figure is: its summary, its unified pool, or a lone pool."""
    for name in (SUMMARY, UNIFIED):
        for held in group:
            if held.event.get("event") == name:
                return held
    return group[0] if len(group) == 1 else None


def _says_va(event: dict[str, Any], source_version: int) -> bool:
    """Whether a pool whose state was not inferred here is a ``VA upper bound`` in today's wording.

    A pool's version 2 is today's wording (its v1 has no state). The unified pool has one version, whose
    line says ``VA upper bound`` only in today's wording (0.5.22's ``UnifiedKVPool reserved VA upper
    bound:``). Without it, a draft's ``KV Cache is allocated`` after that line (no arena line printed)
    waited for the post-capture line and was told a VA bound.
    """
    return event.get(STATE) == VA and (source_version >= 2 or event.get("event") == UNIFIED)


def _state_inferred(event: dict[str, Any]) -> bool:
    """Whether the state is the migration's to revise: not one a line of kvlog's text says was inferred before."""
    note = inferred(event).get(STATE)
    return note is not None and not (isinstance(note, dict) and note.get("rule") == InferenceRule.MARKED_INFERRED)


def _mark_va(event: dict[str, Any], rule: InferenceRule, evidence: str, line: int) -> None:
    event[STATE] = VA
    mark_inferred(event, STATE, rule, evidence, line)


def _read_from_line(event: dict[str, Any]) -> None:
    """Today's wording: ``is allocated`` is what the line says and means."""
    inferred = event["migrated"]["inferred"]
    del inferred[STATE]
    if not inferred:
        del event["migrated"]["inferred"]


def _release(run: _Run) -> None:
    _release_all(run.waiting)
    _release_all(run.uncommitted)


def _release_all(helds: list[Held]) -> None:
    for held in helds:
        held.resolved = True
    helds.clear()
