"""``VmmArena``: reserved address space whose physical backing is committed and given back by range.

The arena is the one place that keeps the books: which granules are backed, which tensor views are
alive over which bytes, and what the kernel or driver says is really held. Every operation emits its
typed event with both figures, so a log can never again present a reservation as memory.

Semantics, shared by both backends:

- Ranges are rounded outwards to the granularity: the start down, the end up (an empty range stays
  empty). The event's
  ``offset_bytes``/``nbytes`` are the rounded range, ``requested_nbytes`` what the caller asked for.
- ``commit`` makes a whole range backed. Granules already backed are left alone and not counted
  again, so committing a range twice is harmless; ``decommit`` likewise skips unbacked granules.
- A commit is all or nothing: when the backend fails half-way (out of memory), the granules this call
  mapped are unmapped again, the books stay exact and a ``kv_arena.error`` event says what happened.
- ``decommit`` refuses a range that a live tensor view from ``tensor()`` overlaps (using it would
  fault), ``close`` refuses while any view is alive. A view is alive while anything shares its
  storage: the tensor, a slice, ``detach()``, ``set_()`` onto its storage, the storage itself, a
  numpy array or a DLPack export. The arena holds a weak reference to the storage, not the tensor
  object, which an alias outlives. ``sleep`` is the deliberate exception: it gives
  back all physical memory under live views, keeping their addresses so captured CUDA graphs stay
  valid; the caller promises not to touch the memory until ``wake`` backs the same ranges again
  (with zeroed memory: a KV cache is recomputed, not preserved).
- One lock serialises the operations of an arena, so events appear in the order the books changed.
- Every size and offset is checked against what the platform can address (``kvlog.memory.limits``)
  before any system or driver call.
- One event per operation, however many ranges it covers: ``commit_many`` and ``wake`` emit one
  ``kv_arena.commit``, ``decommit_many`` and ``sleep`` one ``kv_arena.decommit``, each with the
  batch's range count, lowest offset, the bytes its ranges cover, and the books and measurement
  after the whole batch.
"""

from __future__ import annotations

import gc
import itertools
import os
import threading
import time
from dataclasses import dataclass
from math import prod
from typing import Literal

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from kvlog import events
from kvlog.emission import emit
from kvlog.memory.backend import Backend, Measurement, MeasurementSource
from kvlog.memory.closing import ClosesOnExit
from kvlog.memory.errors import ArenaError, BackendError
from kvlog.memory.host_backend import HostBackend
from kvlog.memory.intervals import Run, RunSet
from kvlog.memory.limits import ADDRESS_SPACE_LIMIT, align_up, checked_int, checked_range

Operation = Literal["reserve", "commit", "decommit", "close", "sleep", "wake"]

_arena_numbers = itertools.count()
_arena_numbers_lock = threading.Lock()

__all__ = ["ArenaChange", "ArenaError", "VmmArena"]


@dataclass(frozen=True)
class ArenaChange:
    """What a ``sleep`` or ``wake`` changed: bytes by the books and as measured before/after."""

    bookkept_bytes: int
    measured_bytes: int | None
    measurement_source: MeasurementSource | None
    duration_us: float


def _next_arena_id() -> str:
    with _arena_numbers_lock:
        return f"{os.getpid()}_{next(_arena_numbers)}"


class VmmArena(ClosesOnExit):
    """A reservation of ``reserved_va_bytes`` of address space on one backend; see the module docstring."""

    def __init__(self, backend: Backend, reserve_bytes: int) -> None:
        """Reserve ``reserve_bytes`` (rounded up to the granularity) and emit ``kv_arena.ready``."""
        self._backend = backend
        self._arena_id = _next_arena_id()
        self._lock = threading.Lock()
        self._committed = RunSet()
        self._views: list[tuple[StorageWeakRef, int, int]] = []
        self._prune_at = 64  # forget dead views when the list reaches this: amortised, not on every view
        self._asleep: list[Run] | None = None
        self._closed = True  # until the reservation exists
        try:
            self._granularity = checked_int("the backend's granularity", backend.granularity, minimum=1)
            requested = checked_int("reserve_bytes", reserve_bytes, minimum=1)
            self._reserved = checked_int("reserve_bytes rounded up", align_up(requested, self._granularity))
        except ArenaError as exc:
            raise self._refuse("reserve", None, None, str(exc)) from None
        try:
            self._base = backend.reserve(self._reserved)
        except (BackendError, ArenaError) as exc:  # ArenaError: a backend's own, tighter limit
            raise self._refuse("reserve", None, self._reserved, str(exc)) from exc
        self._closed = False
        emit(
            events.KvArenaReady(
                arena_id=self._arena_id,
                backend=backend.name,
                device=backend.device,
                reserved_va_bytes=self._reserved,
                granularity_bytes=self._granularity,
                handle_type=backend.handle_type,
            )
        )

    @classmethod
    def host(cls, reserve_bytes: int, *, granularity_bytes: int | None = None) -> VmmArena:
        """An arena of this process's virtual memory; granularity defaults to the page size."""
        return cls(HostBackend(granularity_bytes), reserve_bytes)

    @classmethod
    def cuda(cls, device: int = 0, *, reserve_bytes: int) -> VmmArena:
        """An arena of device memory through the CUDA driver's VMM API (needs the ``cuda`` extra)."""
        from kvlog.memory.cuda_backend import CudaBackend  # noqa: PLC0415 - cuda-bindings only when asked for

        return cls(CudaBackend(device), reserve_bytes)

    @property
    def arena_id(self) -> str:
        """``<pid>_<n>``, unique in this process, as sglang prints it."""
        return self._arena_id

    @property
    def backend(self) -> Backend:
        """The backend holding the memory."""
        return self._backend

    @property
    def base(self) -> int:
        """Address of the first reserved byte."""
        return self._base

    @property
    def reserved_va_bytes(self) -> int:
        """Address space reserved: an upper bound that costs no memory."""
        return self._reserved

    @property
    def granularity_bytes(self) -> int:
        """Every committed range starts and ends on a multiple of this."""
        return self._granularity

    @property
    def committed_bytes(self) -> int:
        """Physical bytes backing the arena now, by the books."""
        return self._committed.total

    @property
    def committed_runs(self) -> list[Run]:
        """The backed ``(start, end)`` offset ranges, in address order."""
        with self._lock:
            return self._committed.runs()

    @property
    def asleep(self) -> bool:
        """Whether ``sleep`` gave the memory back and ``wake`` has not yet restored it."""
        return self._asleep is not None

    @property
    def closed(self) -> bool:
        """Whether ``close`` gave everything back."""
        return self._closed

    def measure(self) -> Measurement | None:
        """What the kernel or driver says backs the arena now, if it can say."""
        with self._lock:
            self._require_open("measure")
            return self._backend.measure(self._base, self._reserved)

    def commit(self, offset: int, nbytes: int) -> None:
        """Back ``[offset, offset + nbytes)`` (rounded outwards) with physical memory."""
        self.commit_many([(offset, nbytes)])

    def commit_many(self, ranges: list[tuple[int, int]]) -> None:
        """Back several ``(offset, nbytes)`` ranges, all or none: one failure rolls back the others.

        One ``kv_arena.commit`` says what the whole batch did (an empty batch does nothing).
        """
        with self._lock:
            self._require_awake("commit")
            aligned, requested = self._aligned("commit", ranges)
            self._map_all(aligned, requested, "commit")

    def decommit(self, offset: int, nbytes: int, *, force: bool = False) -> None:
        """Give back the physical memory of ``[offset, offset + nbytes)`` (rounded outwards).

        ``force`` decommits under live views too: for undoing a growth that no view has used yet.
        """
        self.decommit_many([(offset, nbytes)], force=force)

    def decommit_many(self, ranges: list[tuple[int, int]], *, force: bool = False) -> None:
        """Give back several ``(offset, nbytes)`` ranges; one ``kv_arena.decommit`` says what the batch did.

        Every range is checked (and, unless ``force``, refused under a live view) before any is
        unmapped. A backend failure part-way raises with a ``kv_arena.error`` whose
        ``committed_bytes`` is what the books hold then; an empty batch does nothing.
        """
        with self._lock:
            self._require_awake("decommit")
            aligned, requested = self._aligned("decommit", ranges)
            for start, end in [] if force or not self._views else aligned:  # no view was ever made: none is alive
                users = self._views_over(start, end)
                if users:
                    raise self._refuse(
                        "decommit",
                        start,
                        end - start,
                        f"{_describe(users)} use bytes in [{start}, {end}); drop every tensor, storage or array "
                        "sharing them first (or sleep())",
                    )
            started = time.perf_counter()
            for start, end in aligned:
                self._unmap(start, end, "decommit")
            duration = _elapsed_us(started)
            if aligned:
                measured = self._backend.measure(self._base, self._reserved)
                self._emit_batch(events.KvArenaDecommit, aligned, requested, measured, duration)

    def sleep(self) -> ArenaChange:
        """Give back all physical memory, live views included, keeping the addresses for ``wake``.

        One ``kv_arena.decommit`` covers every run given back, measured once after the last.
        """
        with self._lock:
            self._require_awake("sleep")
            before = self._backend.measure(self._base, self._reserved)
            runs = self._asleep = self._committed.runs()
            started = time.perf_counter()
            for start, end in runs:
                self._unmap(start, end, "sleep")
            duration = _elapsed_us(started)
            after = self._backend.measure(self._base, self._reserved)
            freed = sum(end - start for start, end in runs)
            if runs:
                self._emit_batch(events.KvArenaDecommit, runs, freed, after, duration)
            return ArenaChange(freed, _delta(before, after), _source(after), duration)

    def wake(self) -> ArenaChange:
        """Back again every range ``sleep`` gave back, all or none; the memory comes back zeroed.

        Refused on a closed arena with a ``kv_arena.error``, like every operation on the books: a
        log must show the refusal, not only the caller's traceback.
        """
        with self._lock:
            if self._closed:
                raise self._refuse("wake", None, None, "the arena is closed")
            if self._asleep is None:
                raise self._refuse("wake", None, None, "the arena is not asleep")
            before = self._backend.measure(self._base, self._reserved)
            restored = sum(end - start for start, end in self._asleep)
            duration = self._map_all(self._asleep, restored, "wake")
            self._asleep = None
            after = self._backend.measure(self._base, self._reserved)
            return ArenaChange(restored, _delta(after, before), _source(after), duration)

    def tensor(
        self, offset: int, shape: tuple[int, ...], dtype: torch.dtype, *, require_committed: bool = True
    ) -> torch.Tensor:
        """A zero-copy view of the arena at ``offset``: ``data_ptr() == base + offset``.

        With ``require_committed=False`` the view may extend over reserved but unbacked bytes, as a
        KV pool's buffers do before post-capture sizing; touching those bytes faults.
        """
        with self._lock:
            self._require_open("tensor")
            offset, shape, dtype = self._checked_view(offset, shape, dtype)
            nbytes = prod(shape) * dtype.itemsize
            if nbytes <= 0 or offset % dtype.itemsize or offset + nbytes > self._reserved:
                raise ArenaError(
                    f"arena {self._arena_id}: a {dtype} view of {nbytes} bytes at offset {offset} must be non-empty, "
                    f"aligned to {dtype.itemsize} bytes and inside the {self._reserved}-byte reservation"
                )
            if require_committed and (self._asleep is not None or self._committed.gaps(offset, offset + nbytes)):
                raise ArenaError(
                    f"arena {self._arena_id}: bytes [{offset}, {offset + nbytes}) are not all committed; "
                    "commit them first or pass require_committed=False"
                )
            view = self._backend.tensor(self._base + offset, shape, dtype)
            if view.data_ptr() != self._base + offset:
                raise ArenaError(f"arena {self._arena_id}: backend returned a copy, not a view at offset {offset}")
            if len(self._views) >= self._prune_at:  # so that creating many views never grows the list
                self._prune_at = 2 * len(self._views_over(0, self._reserved)) + 64
            self._views.append((_storage_ref(view), offset, offset + nbytes))
            return view

    def close(self) -> None:
        """Give back the physical memory and the reservation; refused while a tensor view is alive."""
        with self._lock:
            if self._closed:
                return
            if self._views_over(0, self._reserved):
                gc.collect()  # views kept alive only by reference cycles are not in use
            users = self._views_over(0, self._reserved)
            if users:
                raise self._refuse(
                    "close",
                    None,
                    None,
                    f"{_describe(users)} still use the arena; drop every tensor, storage or array sharing them first",
                )
            released = self._committed.total
            for start, end in self._committed.runs():
                self._unmap(start, end, "close")
            try:
                self._backend.release(self._base, self._reserved)
            except BackendError as exc:
                raise self._refuse("close", None, None, str(exc)) from exc
            self._closed = True
            self._asleep = None
            emit(events.KvArenaClosed(arena_id=self._arena_id, released_bytes=released))

    def __repr__(self) -> str:
        state = "closed" if self._closed else "asleep" if self._asleep is not None else "open"
        return (
            f"VmmArena({self._arena_id}, {self._backend.name}, reserved_va={self._reserved}, "
            f"committed={self._committed.total}, {state})"
        )

    # Everything below runs with the lock held.

    def _require_open(self, operation: str) -> None:
        if self._closed:
            raise ArenaError(f"arena {self._arena_id} is closed; {operation} refused")

    def _require_awake(self, operation: Operation) -> None:
        if self._closed:
            raise self._refuse(operation, None, None, "the arena is closed")
        if self._asleep is not None:
            raise self._refuse(operation, None, None, "the arena is asleep; wake() it first")

    def _checked(self, operation: Operation, ranges: object) -> list[Run]:
        """``ranges`` as ``(offset, nbytes)`` pairs of addressable ints; refused (with its event) otherwise.

        Runs before anything else, so that no unchecked value reaches a backend, the books or an event.
        """
        try:
            pairs = list(ranges)  # type: ignore[call-overload]
        except TypeError:
            reason = f"ranges must be (offset, nbytes) pairs, not {ranges!r:.60}"
            raise self._refuse(operation, None, None, reason) from None
        checked: list[Run] = []
        for index, pair in enumerate(pairs):
            if type(pair) is tuple and len(pair) == 2:  # the common case, checked without conversions
                offset, nbytes = pair
                if type(offset) is type(nbytes) is int and 0 <= offset <= offset + nbytes <= ADDRESS_SPACE_LIMIT:
                    checked.append(pair)
                    continue
            try:
                offset, nbytes = pair
            except (TypeError, ValueError):
                reason = f"range {index} is not an (offset, nbytes) pair: {pair!r:.60}"
                raise self._refuse(operation, None, None, reason) from None
            try:
                checked.append(checked_range(offset, nbytes))
            except ArenaError as exc:
                raise self._refuse(operation, None, None, f"range {index}: {exc}") from None
        return checked

    def _checked_view(self, offset: object, shape: object, dtype: object) -> tuple[int, tuple[int, ...], torch.dtype]:
        """A view's offset, shape and dtype as plain ints and a torch dtype, or ``ArenaError``."""
        if not isinstance(dtype, torch.dtype):
            raise ArenaError(f"arena {self._arena_id}: dtype must be a torch.dtype, not {dtype!r:.40}")
        if not isinstance(shape, tuple):
            raise ArenaError(f"arena {self._arena_id}: shape must be a tuple of sizes, not {shape!r:.40}")
        try:
            dims = tuple(checked_int(f"dimension {index} of the shape", dim) for index, dim in enumerate(shape))
            start = checked_int("offset", offset)
        except ArenaError as exc:
            raise ArenaError(f"arena {self._arena_id}: tensor refused: {exc}") from None
        return start, dims, dtype

    def _aligned(self, operation: Operation, ranges: object) -> tuple[list[Run], int]:
        """``ranges`` checked and rounded outwards to whole granules, and the bytes they asked for.

        An empty range stays empty; one that ends past the reservation is refused with its event.
        """
        granularity, reserved = self._granularity, self._reserved
        aligned: list[Run] = []
        requested = 0
        for offset, nbytes in self._checked(operation, ranges):
            start = offset - offset % granularity
            end = align_up(offset + nbytes, granularity) if nbytes else start
            if end > reserved:
                reason = f"[{start}, {end}) goes past the {reserved}-byte reservation"
                raise self._refuse(operation, start, end - start, reason)
            aligned.append((start, end))
            requested += nbytes
        return aligned, requested

    def _views_over(self, start: int, end: int) -> list[Run]:
        """The byte ranges of the live views that overlap ``[start, end)``; dead views are forgotten."""
        self._views = [(ref, lo, hi) for ref, lo, hi in self._views if not ref.expired()]  # type: ignore[no-untyped-call]
        return [(lo, hi) for _, lo, hi in self._views if lo < end and hi > start]

    def _map_all(self, aligned: list[Run], requested: int, operation: Operation) -> float:
        """Map the gaps of every range, undoing this call's mappings if one fails; one event for them all.

        The event's ``committed_bytes`` and measurement are those after the whole batch, which is
        when they are true; it carries the batch's range count, lowest offset, the bytes its ranges
        cover and the ``requested`` bytes. Returns the time spent mapping, in microseconds.
        """
        mapped: list[Run] = []
        committed, backend_map, base = self._committed, self._backend.map, self._base
        started = time.perf_counter()
        try:
            for start, end in aligned:  # on a failure, start and end name the range that failed
                for gap_start, gap_end in committed.gaps(start, end):
                    backend_map(base + gap_start, gap_end - gap_start)
                    mapped.append((gap_start, gap_end))
                    committed.add(gap_start, gap_end)
        except BackendError as exc:
            message = self._undo(mapped, exc)
            for held_start, held_end in self._held(exc):  # what the backend could not give back stays counted
                committed.add(held_start, held_end)
                message += f"; [{held_start}, {held_end}) could not be rolled back and stays committed"
            raise self._refuse(operation, start, end - start, message) from exc
        if not aligned:
            return 0.0
        duration = _elapsed_us(started)
        measured = self._backend.measure(base, self._reserved)
        self._emit_batch(events.KvArenaCommit, aligned, requested, measured, duration)
        return duration

    def _undo(self, mapped: list[Run], error: BackendError) -> str:
        """Unmap what a failed call mapped; the message says what failed and what could not be undone."""
        message = f"{error}; {len(mapped)} range(s) this call had mapped were given back"
        for start, end in reversed(mapped):
            try:
                self._backend.unmap(self._base + start, end - start)
            except BackendError as exc:
                message += f"; except [{start}, {end}): its rollback failed too ({exc}), it stays committed"
                continue
            self._committed.remove(start, end)
        return message

    def _unmap(self, start: int, end: int, operation: Operation) -> None:
        """Unmap what is backed in ``[start, end)``, keeping the books exact if the backend fails."""
        for run_start, run_end in self._committed.covered(start, end):
            try:
                self._backend.unmap(self._base + run_start, run_end - run_start)
            except BackendError as exc:
                if exc.still_held is not None:  # the backend says exactly what it still holds of the run
                    self._committed.remove(run_start, run_end)
                    for held_start, held_end in self._held(exc):
                        self._committed.add(held_start, held_end)
                raise self._refuse(operation, start, end - start, str(exc)) from exc
            self._committed.remove(run_start, run_end)

    def _held(self, error: BackendError) -> list[Run]:
        """The offset ranges a failed backend call says still hold memory."""
        return [(address - self._base, address - self._base + n) for address, n in error.still_held or ()]

    def _emit_batch(
        self,
        kind: type[events.KvArenaCommit | events.KvArenaDecommit],
        aligned: list[Run],
        requested: int,
        measured: Measurement | None,
        duration: float,
    ) -> None:
        """One event for a batch of aligned ranges: their count, lowest offset and the bytes they cover.

        ``committed_bytes`` and the measurement are those after the whole batch, which is when they
        are true.
        """
        if len(aligned) == 1:
            offset, end = aligned[0]
            covered = end - offset
        else:  # ranges may overlap: each byte counted once
            runs = RunSet()
            for start, end in aligned:
                runs.add(start, end)
            covered = runs.total
            offset = min(start for start, _ in aligned)
        emit(
            kind(
                arena_id=self._arena_id,
                range_count=len(aligned),
                offset_bytes=offset,
                nbytes=covered,
                requested_nbytes=requested,
                committed_bytes=self._committed.total,
                measured_committed_bytes=None if measured is None else measured.nbytes,
                measurement_source=None if measured is None else measured.source,
                duration_us=duration,
            )
        )

    def _refuse(self, operation: Operation, offset: int | None, nbytes: int | None, reason: str) -> ArenaError:
        """Emit ``kv_arena.error`` and return the exception for the caller to raise."""
        emit(
            events.KvArenaError(
                arena_id=self._arena_id,
                operation=operation,
                offset_bytes=offset if offset is None or offset >= 0 else None,  # a negative one is in `error`
                nbytes=nbytes if nbytes is None or nbytes >= 0 else None,
                error=reason,
                committed_bytes=self._committed.total,
            ),
            level="error",
        )
        return ArenaError(f"arena {self._arena_id}: {operation} refused: {reason}")


def _storage_ref(view: torch.Tensor) -> StorageWeakRef:
    """A weak reference to the storage under ``view``: alive while any tensor, storage or array shares it."""
    return StorageWeakRef(view.untyped_storage())  # type: ignore[no-untyped-call]


def _describe(users: list[Run]) -> str:
    """Live views as their byte ranges, the first few named, for a refusal message."""
    named = ", ".join(f"[{lo}, {hi})" for lo, hi in users[:4])
    more = f" and {len(users) - 4} more" if len(users) > 4 else ""
    return f"{len(users)} live tensor view(s) over {named}{more}"


def _source(measured: Measurement | None) -> MeasurementSource | None:
    return measured.source if measured else None


def _delta(larger: Measurement | None, smaller: Measurement | None) -> int | None:
    """Bytes between two measurements of the same arena; None unless both exist."""
    if larger is None or smaller is None:
        return None
    return larger.nbytes - smaller.nbytes


def _elapsed_us(started: float) -> float:
    """Microseconds since ``started`` (a ``perf_counter`` reading), to the nanosecond."""
    return round((time.perf_counter() - started) * 1e6, 3)
