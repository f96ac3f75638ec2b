"""The logging handler a server loads through ``kvlog integrate``: its memory records as typed events, live.

On the server's thread a record costs a few character searches (``might_be_read``; one compiled scan
where ``kvlog._native`` is built, ``_gate``) and, for the few that pass, a put on a bounded queue; a
full queue drops the record and counts it, and so does a full byte budget (``kvlog.integrate.budget``:
what the queue and the look-ahead hold together, at most
``max_held_bytes``). The look-ahead takes at most half of it: past that, the events waiting for a
later line are written as they stand (the bound in ``migrated.inferred``), so that the records after
them are read rather than dropped. Everything else
happens on one worker thread per process: each record's message is read by the migration engine
under the header the record itself says (``FileRun.messages``: no prefix is printed for it, nor split
off it), with the same grammar and context rules as ``kvlog migrate`` and ``kvlog follow`` (the arena
line before a pool, the post-capture lines after it, held for at most ``hold_s`` as ``follow`` holds
them). The header says what a printed line could only infer: the exact time (``created``, UTC, so
nothing about it is inferred), the process id, and the ranks (the process's, or its record's process
name's). The record's logger and the source file and line of its logging call are provenance in
``ext`` (``logger``, ``code_file``, ``code_line``); ``migrated.file`` is null (no file was read) and
``migrated.line`` numbers the records' lines the handler read in its process, so an event's evidence
lines and its run stay those of its process.

The handler never raises into the server and never blocks it: failures to write are said once on
standard error and the events of that process are dropped and counted. A forked child starts afresh
(its own queue, worker, context, counts and output), as a process with its own ``{pid}`` must, and
writes what it holds when it exits, also through ``os._exit`` after a ``multiprocessing`` child's end.
What the worker will need is made when the handler is, on the configuring thread (``_ready``): a fork
can then never find the worker inside an import (the child would inherit that module half-initialised,
its lock held for ever), and a fork waits for the worker to finish the batch it is reading (``_Fork``),
so that a child inherits no lock the worker held.

With ``nvml`` the worker also samples the process's device memory through NVML (``kvlog.nvml``) as it
takes each record off the queue: a sample costs some microseconds to a millisecond, a thousand times
the probe, so never on the server's thread. Each event read from a sampled record is followed by a
``device_memory.measured`` event with the figures, and a pool whose line only claims to be allocated
gets its state from them (``kvlog.nvml.measured_rule``). Without nvidia-ml-py, a driver or a working
NVML, the worker says so once and the events are what they are without it; an NVML call that fails
stops the sampling the same way.

``close`` (at exit, or when a later ``dictConfig`` clears every handler) writes what is held as at a
file's end; a record that still reaches the handler afterwards (one a new configuration kept
attached, such as vLLM's when uvicorn configures its own loggers) starts a fresh reading.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import multiprocessing.util
import os
import queue
import socket
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, ClassVar, NamedTuple

import orjson

from kvlog import events as catalog_events
from kvlog import native
from kvlog.envelope import InferenceRule, envelope, ordered, utc_timestamp
from kvlog.follow.holding import HOLD_S, Holding
from kvlog.integrate.budget import MAX_HELD_BYTES, Budget, cost, readable
from kvlog.integrate.servers import LIVE_SERVERS, LiveServer, configuring
from kvlog.metrics.errors import MetricsEndpointError
from kvlog.migration import load_chain
from kvlog.migration.candidates import MESSAGE_PROBE_CHARACTERS, might_be_read
from kvlog.migration.candidates import chosen as chosen_prefilter
from kvlog.migration.engine import FileRun, MigrateOptions, Migrator
from kvlog.migration.ops import inferred, mark_inferred
from kvlog.migration.records import Record
from kvlog.migration.report import MigrationReport
from kvlog.migration.sampling import UsageMode
from kvlog.nvml import DeviceSample, NvmlSampler, SamplingError, measured_state, open_sampler
from kvlog.schema.readings import json_integer, pool_size_fields
from kvlog.text.prefix import LinePrefix, rank_tags

if TYPE_CHECKING:
    from kvlog.metrics.prometheus import Endpoint as _Endpoint

#: records waiting for the worker; beyond this the server logs faster than they can be read, and they are dropped
QUEUE_RECORDS = 10_000
#: how often an idle worker wakes, to let held events' time run out
TICK_S = 1.0
#: ports tried from the handler's port plus the local rank, when other processes took them
_PORT_TRIES = 64
#: records the worker reads at once: one feed of the engine, one flush of the events
_BATCH = 1_000
#: nor more than these bytes of records (``budget.cost``), or a sixteenth of the budget: a batch's text is copied
#: three times while it is read, on top of what is held
_BATCH_BYTES = 4 << 20
#: how long the worker lets records gather after one arrives (each wake-up of a thread costs the server too)
_GATHER_S = 0.05
#: how long closing waits for the worker to write what it holds (logging.shutdown at the server's exit)
CLOSE_S = 5.0
#: how long a fork waits for the worker to finish its batch (one stuck on a write must not hold the server's fork)
FORK_WAIT_S = 2.0
#: the pool events whose claimed state a measurement may settle: by what is held, and (True) by the rise since
#: the previous record too, which only a pool's own line can use (it is logged right after its buffers are made;
#: a hybrid pool's summary comes after its sub-pools' lines, a unified pool's after its sub-pools' details)
_POOLS = {"kv_pool.allocation": True, "kv_pool.swa_summary": False, "kv_pool.unified_allocation": False}
#: the rules under which a pool's state is only its line's claim
_CLAIMS = frozenset({"line-claims-allocated", "v1-claims-allocated", InferenceRule.LOOKAHEAD_EXHAUSTED.value})


class _Record(NamedTuple):
    """What the worker needs of a record (the record itself may be changed by later handlers)."""

    created: float
    message: str
    logger: str
    pathname: str
    lineno: int
    process: int | None
    process_name: str
    #: the bytes it is charged while held (``budget.cost``)
    cost: int


class EventHandler(logging.Handler):
    """Reads a server's records into typed events, written per process to ``events`` (``-``: standard error).

    ``events`` may hold ``{pid}`` and ``{rank}`` (``tp0``, ``dp1-tp1-ep1``; ``main`` for a process without
    ranks), filled in when the process writes its first event. ``metrics_port`` serves the process's
    gauges (``kvlog.metrics``) at ``metrics_port`` plus its local rank (``LOCAL_RANK``, else its TP rank).
    ``usage`` says which of the server's periodic usage lines become ``kv_pool.usage`` events (``none``,
    ``sampled``, ``all``: ``kvlog.migration.sampling``), which the gauges serve. ``nvml`` samples the
    process's device memory at each record (the ``nvml`` extra; see the module's docstring).
    """

    def __init__(
        self,
        server: LiveServer,
        events: str,
        *,
        ranks: dict[str, int] | None = None,
        metrics_port: int | None = None,
        metrics_host: str = "127.0.0.1",
        hold_s: float = HOLD_S,
        queue_records: int = QUEUE_RECORDS,
        max_held_bytes: int = MAX_HELD_BYTES,
        usage: UsageMode = "none",
        nvml: bool = False,
    ) -> None:
        super().__init__()
        self.server = server
        self.events = events
        self.ranks = ranks
        self.metrics_port = metrics_port
        self.metrics_host = metrics_host
        self.hold_s = hold_s
        self.queue_records = queue_records
        self.max_held_bytes = max_held_bytes
        self.usage = usage
        self._reads_usage = usage != "none"
        self.nvml = nvml
        self._migrator, self._unreadable = _ready(self)
        _gate(self)
        self._fresh()
        _handlers.add(self)

    def _fresh(self) -> None:
        """Start afresh in this process: nothing read, no worker (a forked child has none of its parent's)."""
        self._pid = os.getpid()
        #: records dropped in this process because the queue or the budget was full, or the events could not be written
        self.dropped = 0
        #: of those, the records the budget could not take
        self.over_budget = 0
        self.written = 0
        #: NVML samples taken in this process (``nvml``)
        self.samples = 0
        self.budget = Budget(self.max_held_bytes)
        self._say_once: set[str] = set()
        self._start_lock = threading.Lock()
        #: held by the worker while it reads (never while it waits): a fork waits for it (``_Fork``)
        self._busy = threading.Lock()
        self._idle()

    def _idle(self) -> None:
        """No reading under way: the next record starts one."""
        self._queue: queue.Queue[_Record | None] = queue.Queue(self.queue_records)
        self._stopping = threading.Event()
        self._worker: threading.Thread | None = None
        self._reading: _Reading | None = None

    # -- the server's thread ------------------------------------------------------------------------

    def handle(self, record: logging.LogRecord) -> bool:
        """Cheap unless the record may be a memory line; never raises, never waits.

        The reference: where ``kvlog._native`` is selected, the handler's ``handle`` is its ``Gate``
        (``_gate``), which decides plain records itself and hands this one the others.
        """
        try:
            message = record.msg
            if record.args or not isinstance(message, str):
                message = record.__dict__.get("message") or record.getMessage()
            if might_be_read(message, usage=self._reads_usage):
                self._candidate(record, message)
        except Exception:  # noqa: BLE001 - a record that cannot be formatted is the server's own handler's concern
            return True
        return True

    def _candidate(self, record: logging.LogRecord, message: str) -> None:
        """A record the probe let by: the handler's filters, then the budget and the queue."""
        with contextlib.suppress(Exception):  # never into the server
            if not self.filters or self.filter(record):
                self._put(record, message)

    def emit(self, record: logging.LogRecord) -> None:
        self.handle(record)

    def _put(self, record: logging.LogRecord, message: str) -> None:
        if self._pid != os.getpid():
            self._fresh()  # a child forked without the at-fork hook (or before it ran)
        if self._worker is None:
            self._start()
        message = readable(message)
        size = cost(message)
        if not self.budget.take(size):
            self.dropped += 1
            self.over_budget += 1
            return
        process_name = record.__dict__.get("vllm_process_name") or record.processName or ""
        item = _Record(
            record.created, message, record.name, record.pathname, record.lineno, record.process, process_name, size
        )
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self.budget.give(size)
            self.dropped += 1

    def _start(self) -> None:
        with self._start_lock:
            if self._worker is None:
                worker = threading.Thread(target=self._work, name="kvlog-events", daemon=True)
                worker.start()
                self._worker = worker
                # a multiprocessing child ends in os._exit, past atexit and logging.shutdown: its finalizers run
                multiprocessing.util.Finalize(self, self.close, exitpriority=10)

    # -- the worker ---------------------------------------------------------------------------------

    def _work(self) -> None:
        stopping, records = self._stopping, self._queue
        batch_bytes = min(_BATCH_BYTES, self.max_held_bytes // 16)
        try:
            with self._busy:
                reading = self._reading = _Reading(self)
        except Exception as exc:  # noqa: BLE001 - broken migrations: the server runs on, its records are dropped
            self.say(f"cannot read records ({type(exc).__name__}: {exc}); this process's records are dropped")
            reading = None
        while True:
            try:
                batch = [records.get(timeout=TICK_S)]
            except queue.Empty:
                batch = [None]
            if reading is not None:  # as the record leaves the queue: the nearest the worker gets to its moment
                reading.sample(batch[-1])
            if batch[-1] is not None:  # a server logs its memory lines in bursts: let the burst come, read it at once
                stopping.wait(_GATHER_S)
            size = sum(item.cost for item in batch if item is not None)
            while batch[-1] is not None and len(batch) < _BATCH and size < batch_bytes:  # one feed, one flush
                try:
                    batch.append(records.get_nowait())
                except queue.Empty:
                    break
                if reading is not None:
                    reading.sample(batch[-1])
                size += batch[-1].cost if batch[-1] is not None else 0
            read = [item for item in batch if item is not None]
            if reading is None:
                self._drop(read)
            else:
                with self._busy:
                    try:
                        reading.read(read)
                        reading.expire()
                    except Exception as exc:  # noqa: BLE001 - the worker outlives any one record
                        self.say(f"a record could not be read ({type(exc).__name__}: {exc}); the others go on")
            if batch[-1] is None and stopping.is_set():  # woken by close (or idle after it): all queued is read
                return

    def close(self) -> None:
        """Write what is read and held (as at a file's end), and close the output.

        Waits at most ``CLOSE_S`` for the worker: it runs inside ``dictConfig`` or at exit, on the server's
        thread. Records the server's other threads log meanwhile queue behind the worker's wake-up, where
        it stops: they are read here, after it (they were lost, and not even counted). A record that
        comes later starts a fresh reading.
        """
        worker, records = self._worker, self._queue
        if worker is not None and self._pid == os.getpid():
            self._stopping.set()
            with contextlib.suppress(queue.Full):
                records.put_nowait(None)  # wakes the worker at once
            worker.join(CLOSE_S)
            reading = self._reading
            if worker.is_alive():
                self.say("closing: the events still being read were not all written")
            elif reading is None:
                self._drop(_queued(records))
            else:
                with self._busy:
                    try:
                        reading.read(_queued(records))
                        reading.finish()
                    except Exception as exc:  # noqa: BLE001 - nothing may escape into dictConfig or the server's exit
                        self.say(f"closing: {type(exc).__name__}: {exc}")
                    reading.forget_all()
            with self._start_lock:
                self._idle()
            if not worker.is_alive():  # logged by another thread after the last read, before the new queue
                self._drop(_queued(records))
        if self.dropped:
            self.say(f"{self.dropped} records dropped (the queue was full or the events could not be written)")
        if self.over_budget:
            held = f"{self.max_held_bytes / (1 << 20):g} MiB"
            self.say(f"{self.over_budget} of them because the handler held its {held} (--max-held)")
        super().close()

    def _drop(self, records: list[_Record]) -> None:
        """Records that will never be read: counted, their bytes given back."""
        self.dropped += len(records)
        self.budget.give(sum(record.cost for record in records))

    def say(self, text: str) -> None:
        """Tell the operator, once per text, on standard error (a handler has nowhere else to say it)."""
        if text in self._say_once:
            return
        self._say_once.add(text)
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(f"kvlog: {text}\n")


def _queued(records: queue.Queue[_Record | None]) -> list[_Record]:
    """The records still in ``records``, once its worker has ended."""
    left = []
    with contextlib.suppress(queue.Empty):
        while True:
            item = records.get_nowait()
            if item is not None:
                left.append(item)
    return left


class _Reading:
    """One process's records through the engine: the run, its look-ahead clock, its output and gauges."""

    def __init__(self, handler: EventHandler) -> None:
        self.handler = handler
        if handler._migrator is None:
            raise handler._unreadable or ValueError("no migrations")
        self.migrator = handler._migrator
        self.run = FileRun(self.migrator, None, MigrationReport(files=1), None, self)
        self.holding = Holding(handler.hold_s)
        #: the record each line still waiting to be written came from, by line number (in ``lines`` order)
        self.records: dict[int, _Record] = {}
        self.lines: deque[int] = deque()
        #: the bytes charged for each batch read (``budget.cost``), by its last line, until that line is written
        self.charged: deque[tuple[int, int]] = deque()
        self.charged_bytes = 0
        #: what the look-ahead may hold: past it, the events waiting for a later line are written as they stand
        self.lookahead_bytes = handler.max_held_bytes // 2
        self.bound = f"{self.lookahead_bytes / (1 << 20):g} MiB of records held"
        self.output: _Output | None = None
        self.observe: Callable[[dict[str, Any]], None] | None = None
        self.sampler = _sampler(handler)
        #: samples taken as records left the queue, until ``read`` numbers their lines
        self.taken: dict[int, DeviceSample] = {}
        #: each line's measurement, kept while its record is (``records``)
        self.measured: dict[int, _Measured] = {}
        self.previous: _Measured | None = None

    def sample(self, record: _Record | None) -> None:
        """NVML's figures for ``record``, taken now (on the worker, as it leaves the queue); stop at a failure."""
        if record is None or self.sampler is None:
            return
        handler = self.handler
        with handler._busy:  # a fork never finds the worker inside NVML
            try:
                sample = self.sampler.sample()
            except SamplingError as exc:
                handler.say(f"{exc}; this process's events are written without measurements from now on")
                self.sampler.close()
                self.sampler = None
                return
        if sample is not None:
            handler.samples += 1
            self.taken[id(record)] = sample

    def read(self, records: list[_Record]) -> None:
        """Records as messages under their own headers, fed to the engine at once; the events written, flushed.

        Each record's header is what it says itself: its time, pid, and ranks (the process's, else its
        process name's). No level: the wording's, as every memory line kvlog reads gets it.
        """
        server, own = self.handler.server, self.handler.ranks
        size = sum(record.cost for record in records)
        if size:  # charged to the batch's last line before anything can fail: its bytes are given back all the same
            self.charged.append((self.run.number + sum(r.message.count("\n") + 1 for r in records), size))
            self.charged_bytes += size
        said: list[LinePrefix] = []
        number = self.run.number
        taken, self.taken = self.taken, {}  # each sample is of a record of this batch: none outlives it
        for record in records:
            ranks = own if own is not None else server.record_ranks(record.process_name)
            timestamp = utc_timestamp(record.created)
            said.append(LinePrefix(timestamp, ranks or {}, None, record.message, pid=record.process, exact=True))
            sample = taken.get(id(record)) if taken else None
            measured = None if sample is None else _Measured(sample, number + 1, record, self.previous)
            for _ in range(record.message.count("\n") + 1):
                number += 1
                self.records[number] = record
                self.lines.append(number)
                if measured is not None:
                    self.measured[number] = measured
            if measured is not None:
                self.previous = measured
        if said:
            self.run.messages(said)
            self.holding.read(self.run, time.monotonic())
        self._forget_written()
        if self.charged_bytes > self.lookahead_bytes:
            self.run.release_through(self.run.number, self.bound)
            self._forget_written()
        self._flush()

    def expire(self) -> None:
        self.holding.expire(self.run, time.monotonic())
        self._forget_written()
        self._flush()

    def _flush(self) -> None:
        if self.output is not None:
            self.output.flush()

    def finish(self) -> None:
        self.run.finish()
        if self.output is not None:
            self.output.flush()
            self.output.close()
        if self.sampler is not None:
            self.sampler.close()
            self.sampler = None

    def _forget_written(self) -> None:
        written = self.run.written_lines
        while self.lines and self.lines[0] <= written:
            line = self.lines.popleft()
            del self.records[line]
            self.measured.pop(line, None)
        while self.charged and self.charged[0][0] <= written:
            self._give(self.charged.popleft()[1])

    def forget_all(self) -> None:
        """The reading is over (its records written, or lost with it): every byte charged is given back."""
        while self.charged:
            self._give(self.charged.popleft()[1])

    def _give(self, size: int) -> None:
        self.charged_bytes -= size
        self.handler.budget.give(size)

    def passthrough(self, data: bytes | memoryview) -> None:
        """The downstream's bytes: none but the empty lines of ``only_events`` (it reads events only)."""

    def record(self, read: Record) -> None:
        """An event the engine read: where its log record was logged added, written, and told to the gauges."""
        record = self.records.get(read.line)
        event = dict(read.event)  # the engine's context may still revise its own: what the record adds is ours
        if record is not None:  # the engine validated the event; what the record adds is valid by construction
            _logged_at(event, record)
        measured = self.measured.get(read.line)
        if measured is not None:
            _settle(event, measured, read.line)
        ranks = event.get("ranks") or {}
        if self.output is None:
            self.output = _Output(self.handler, ranks)
            self.observe = _gauges(self.handler, ranks)
        if not self.output.write(orjson.dumps(ordered(event)) + b"\n"):
            self.handler.dropped += 1
        if measured is not None and not self.output.write(orjson.dumps(measured.event(event, read.line)) + b"\n"):
            self.handler.dropped += 1
        if self.observe is not None:
            self.observe(event)


class _Measured:
    """A record's NVML sample, and the previous one of the process: what ``device_memory.measured`` says."""

    __slots__ = ("lag_s", "line", "previous", "sample")

    def __init__(self, sample: DeviceSample, line: int, record: _Record, previous: _Measured | None) -> None:
        self.sample = sample
        #: the record's first line
        self.line = line
        self.lag_s = max(0.0, sample.at - record.created)
        self.previous = previous

    def event(self, measured: dict[str, Any], line: int) -> dict[str, Any]:
        """The ``device_memory.measured`` written after ``measured`` (read from ``line``), valid by construction."""
        sample, previous = self.sample, self.previous
        before = previous.sample if previous is not None and previous.sample.gpu == sample.gpu else None
        used, used_before = sample.process_used_bytes, None if before is None else before.process_used_bytes
        fields = catalog_events.DeviceMemoryMeasured(
            source="nvml",
            measured_event=str(measured.get("event")),
            measured_line=line,
            gpu=sample.gpu,
            uuid=sample.uuid,
            process_used_bytes=used,
            device_used_bytes=sample.device_used_bytes,
            device_free_bytes=sample.device_free_bytes,
            device_total_bytes=sample.device_total_bytes,
            process_used_delta_bytes=None if used is None or used_before is None else used - used_before,
            device_used_delta_bytes=None if before is None else sample.device_used_bytes - before.device_used_bytes,
            previous_line=None if previous is None else previous.line,
            lag_us=round(self.lag_s * 1e6, 1),
        ).to_dict()
        head = envelope(fields.pop("event"), fields.pop("schema_version"), utc_timestamp(sample.at), "info")
        if "pid" in measured:
            head["pid"] = measured["pid"]
        if measured.get("ranks"):
            head["ranks"] = measured["ranks"]
        return head | fields


def _settle(event: dict[str, Any], measured: _Measured, line: int) -> None:
    """A pool whose line only claims it is allocated: its state by measurement, when the figures tell it."""
    rises = _POOLS.get(str(event.get("event")))
    if rises is None:
        return
    note = inferred(event).get("allocation_state")
    names = pool_size_fields(event)
    if not isinstance(note, dict) or note.get("rule") not in _CLAIMS or names is None:
        return
    spreads = event["migrated"].get("uncertainty_bytes") or {}
    stated = sum(json_integer(event[name]) or 0 for name in names)
    spread = sum(json_integer(spreads.get(name)) or 0 for name in names)
    previous = measured.previous if rises else None
    verdict = measured_state(
        stated,
        spread,
        measured.sample,
        measured.lag_s,
        before=None if previous is None else previous.sample,
        before_lag_s=0.0 if previous is None else previous.lag_s,
    )
    if verdict is None:
        return
    event["allocation_state"] = verdict.state
    evidence_line = previous.line if verdict.previous and previous is not None else line
    mark_inferred(event, "allocation_state", InferenceRule.MEASURED, verdict.evidence, evidence_line)


def _sampler(handler: EventHandler) -> NvmlSampler | None:
    """The process's NVML sampler when ``nvml`` asks for one; None, said once, when NVML cannot be had."""
    if not handler.nvml:
        return None
    sampler, why = open_sampler()
    if sampler is None:
        handler.say(f"no device measurements: {why}")
    return sampler


def _logged_at(event: dict[str, Any], record: _Record) -> None:
    """Where the record was logged (its logger, its call site), which no header says: provenance in ``ext``."""
    code = {"code_file": record.pathname, "code_line": record.lineno} if record.lineno >= 1 else {}
    event["ext"] = {**event.get("ext", {}), "logger": record.logger, **code}


def _rank_name(ranks: dict[str, int]) -> str:
    return rank_tags(ranks).strip().lower().replace(" ", "-") or "main"


class _Output:
    """The events file of this process (``{pid}``, ``{rank}`` filled in), or standard error for ``-``.

    An event counts as written (``handler.written``) once it is flushed: the events buffered when a
    write or a flush fails are lost with the output, and count as dropped.
    """

    def __init__(self, handler: EventHandler, ranks: dict[str, int]) -> None:
        self.handler = handler
        self.stream: IO[bytes] | None = None
        #: events written since the last flush, still in a buffer
        self.buffered = 0
        if handler.events == "-":
            self.name = "standard error"
            return
        self.name = handler.events.replace("{pid}", str(os.getpid())).replace("{rank}", _rank_name(ranks))
        try:
            self.stream = open(self.name, "ab")  # noqa: SIM115, PTH123 - held for the process's life
        except OSError as exc:
            handler.say(f"{self.name}: cannot write events: {exc.strerror}; this process's events are dropped")
            self.name = ""

    def write(self, line: bytes) -> bool:
        """One event, buffered until ``flush`` (after each batch of records)."""
        try:
            if self.name == "standard error":
                sys.stderr.write(line.decode())
            elif self.stream is not None:
                self.stream.write(line)
            else:
                return False
        except (OSError, ValueError) as exc:
            self._broken(exc)
            return False
        self.buffered += 1
        return True

    def flush(self) -> None:
        try:
            if self.name == "standard error":
                sys.stderr.flush()
            elif self.stream is not None:
                self.stream.flush()
        except (OSError, ValueError) as exc:
            self._broken(exc)
        self.handler.written += self.buffered
        self.buffered = 0

    def _broken(self, exc: Exception) -> None:
        self.handler.say(f"{self.name}: cannot write events: {exc}; this process's events are dropped")
        self.handler.dropped += self.buffered
        self.buffered = 0
        self.stream = None
        self.name = ""

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()


def _gauges(handler: EventHandler, ranks: dict[str, int]) -> Callable[[dict[str, Any]], None] | None:
    """The gauges of this process, at the handler's port plus its local rank (or the next free one); None without.

    Not every process of a server sets ``LOCAL_RANK`` (vLLM's engine core, sglang's data-parallel
    schedulers), and two can share a TP rank: a port another process took moves this one up, and the
    address it serves at is said. Port 0 is any free port for every process: its local rank is not added
    (that would make it a low port, 1 for TP rank 1).
    """
    if handler.metrics_port is None:
        return None
    try:
        from kvlog import metrics  # noqa: PLC0415 - the follow extra, only with a metrics port

        series = metrics.MemorySeries(ledger=metrics.LedgerFigures())
        local = int(os.environ.get("LOCAL_RANK", ranks.get("tp", 0)))
        base = handler.metrics_port + local if handler.metrics_port else 0
        endpoint = _first_free(lambda port: metrics.start_endpoint(series, handler.metrics_host, port), base)
    except Exception as exc:  # noqa: BLE001 - the extra missing, no port free: the server runs on without gauges
        handler.say(f"no metrics for this process: {exc}")
        return None
    handler.say(f"serving metrics of pid {os.getpid()} at {endpoint.url}")
    instance = f"{socket.gethostname()}:{os.getpid()}"
    series.add_instance(instance, device=metrics.process_device())
    return lambda event: series.observe(event, instance=instance)


def _first_free(start: Callable[[int], _Endpoint], base: int) -> _Endpoint:
    """``start(port)`` at ``base`` or the first free port after it (``base`` 0: any free port)."""
    ports = range(base, base + _PORT_TRIES) if base else range(1)
    for port in ports[:-1]:
        with contextlib.suppress(MetricsEndpointError):
            return start(port)
    return start(ports[-1])


def _ready(handler: EventHandler) -> tuple[Migrator | None, Exception | None]:
    """The migrator, with every module and compiled schema the worker will use, made on the configuring thread.

    The worker once made it, and imported the validator with the first event: a fork while it was inside
    that import (sglang forks its schedulers just after configuring) left the child the module half
    initialised and its import lock held by a thread the child does not have. The child's worker then
    failed every batch (``partially initialized module``) or waited on the lock for ever, its events
    lost. Loading the migrations, compiling every schema and importing the validators cost about 0.15 s
    (0.35 s with the metrics extra) on a 2-vCPU VM: once per server process, at its start. A child
    shares what was made here (copy-on-write), and builds only its own run.
    """
    try:
        migrator = Migrator(
            load_chain(), MigrateOptions(only_events=True, source=handler.server.name, usage=handler.usage)
        )
        validator = migrator.validator
        for name, versions in validator.catalog.schemas.items():
            for version in versions:
                validator.fast_check(name, version)
        validator.violations({"event": next(iter(validator.catalog.schemas)), "schema_version": 1})
        validator.provenance_problem({})
        # the native module, where built, imported here and not by the worker
        chosen_prefilter(usage=handler.usage != "none")
    except Exception as exc:  # noqa: BLE001 - broken migrations: the server runs on, its records are dropped
        return None, exc
    if handler.nvml:
        with contextlib.suppress(Exception):  # the extra missing: the worker says so when it opens its sampler
            import pynvml  # noqa: F401, PLC0415 - the nvml extra, only with nvml
    if handler.metrics_port is not None:
        with contextlib.suppress(Exception):  # the extra missing: the worker says so, with the process's first event
            from kvlog import metrics  # noqa: PLC0415 - the follow extra, only with a metrics port

            _ = metrics.MemorySeries, metrics.start_endpoint, metrics.process_device
            metrics.LedgerFigures()  # the ledger's modules and the catalog's validator: a scrape needs them
            handler.metrics_host.encode("idna")  # as binding the endpoint does: the codec is imported on first use
    return migrator, None


def _gate(handler: EventHandler) -> None:
    """The native probe as the handler's ``handle``, where ``kvlog._native`` is selected (``kvlog.native``).

    Logging calls ``handler.handle(record)`` for every record a server logs: found in the instance, the
    compiled builtin (one argument, no argument tuple, no PyO3 object pool) is called without the two
    Python frames of ``EventHandler.handle`` and its ten character searches (``BENCHMARKS.md``, issue 34),
    and hands that method every record it does not decide. Chosen on the configuring thread, as the rest
    of what the worker needs.
    """
    compiled = native.selected()
    if compiled is None:
        return
    gate = compiled.Gate(
        MESSAGE_PROBE_CHARACTERS,
        handler._reads_usage,
        handler._candidate,
        functools.partial(EventHandler.handle, handler),
    )
    handler.__dict__["handle"] = gate.handle  # an instance's attribute: mypy would not let a method be assigned


_handlers: weakref.WeakSet[EventHandler] = weakref.WeakSet()


class _Fork:
    """A fork waits for every handler's worker to finish the batch it is reading; the child starts afresh.

    A worker forked mid-batch leaves its locks held in the child (an output's buffer, the standard error
    of ``--events -``, an import's) by a thread that is not there. Waiting is bounded (``FORK_WAIT_S``):
    a worker stuck on a write must not hold the server's fork for ever.
    """

    held: ClassVar[list[threading.Lock]] = []

    @classmethod
    def before(cls) -> None:
        for handler in list(_handlers):
            busy = handler._busy
            if busy.acquire(timeout=FORK_WAIT_S):
                cls.held.append(busy)

    @classmethod
    def after_in_parent(cls) -> None:
        while cls.held:
            cls.held.pop().release()

    @classmethod
    def after_in_child(cls) -> None:
        cls.held.clear()  # the child's handlers get locks of their own
        for handler in list(_handlers):
            handler._fresh()


os.register_at_fork(before=_Fork.before, after_in_parent=_Fork.after_in_parent, after_in_child=_Fork.after_in_child)


def handler_for(
    server: str,
    events: str = "-",
    *,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    hold_s: float = HOLD_S,
    max_held_bytes: int = MAX_HELD_BYTES,
    usage: UsageMode = "none",
    nvml: bool = False,
    server_default: bool = True,
) -> logging.Handler:
    """The ``dictConfig`` factory (``"()": "kvlog.integrate.handler_for"``) that ``kvlog integrate`` writes.

    Called inside the server's configure function: with ``server_default`` it first runs the server's
    own default configuration (text output unchanged) and puts the handler on the server's logger itself;
    without (``--keep``), the configuration it is in says where the handler goes. The same file loaded
    again by that default run adds nothing.
    """
    if configuring.active:
        configuring.reloaded = True
        return logging.NullHandler()
    live = LIVE_SERVERS[server]
    frame = live.configuring_frame()
    if server_default and frame is None:
        for companion in live.companions:
            companion_frame = companion.configuring_frame()
            if companion_frame is not None:  # its own default, as without kvlog; it logs no memory
                companion.run_default(companion_frame)
                return logging.NullHandler()
    if server_default and frame is not None:
        configuring.active = True
        try:
            live.run_default(live, frame)  # first: a dictConfig in it closes every handler made before it
        finally:
            configuring.active = False
    made = EventHandler(
        live,
        events,
        ranks=live.process_ranks(frame),
        metrics_port=metrics_port,
        metrics_host=metrics_host,
        hold_s=hold_s,
        max_held_bytes=max_held_bytes,
        usage=usage,
        nvml=nvml,
    )
    if server_default:
        if frame is None:
            made.say(
                f"not loaded by {server}'s {live.function}: the server's default handlers are not set up; events only"
            )
        logging.getLogger(live.logger).addHandler(made)
    return made
