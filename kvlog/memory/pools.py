"""KV pools as zero-copy tensors over a ``VmmArena``, with events that say what is really held.

A pool is a set of buffers (per layer: K and V for MHA, one compressed KV for MLA), each a tensor of
``[rows, heads, head_dim]`` whose rows are token slots. Each buffer owns a granule-aligned region of
one arena, large enough for its largest size, so that growing the pool commits more of each region
and never moves a tensor. Two lifecycles:

- eager (``allocate``): reserve and commit the final size at once; ``kv_pool.allocation`` says
  ``allocated``;
- post-capture (``plan`` then ``finalize``): reserve address space for an upper bound and back only
  the first page, so CUDA graphs can be captured over the buffers (``va_upper_bound``); after
  capture, ``finalize`` sizes the pool from a byte budget and commits exactly that, at the same
  addresses (``kv_pool.post_capture_sized`` then ``kv_pool.allocation`` with ``allocated``).

Device pools have ``num_tokens + page_size`` rows: the extra page is the padding slot graphs write to.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from math import prod
from typing import TYPE_CHECKING, Literal

import torch

from kvlog import events
from kvlog.emission import emit
from kvlog.memory.arena import ArenaChange, VmmArena
from kvlog.memory.backend import Backend, BackendName
from kvlog.memory.closing import ClosesOnExit
from kvlog.memory.errors import PoolSizingError, PoolStateError
from kvlog.memory.host_backend import HostBackend
from kvlog.memory.limits import ADDRESS_SPACE_LIMIT, align_up, checked_int
from kvlog.memory.pinning import PinnedRanges
from kvlog.memory.sizing import free_memory_bytes, largest_fitting
from kvlog.schema.readings import json_number

if TYPE_CHECKING:
    from typing import Self

AllocationState = Literal["va_upper_bound", "allocated"]
Label = Literal["Full", "SWA"]
GB = 10**9
# Each layer is one or two buffers, each a tensor and a granule-aligned region of its own: a count
# far beyond any model's (hundreds) would only make construction run for minutes before failing.
MAX_LAYERS = 1 << 12


@dataclass(frozen=True)
class KVShape:
    """The model shape a pool is built from. For MLA, ``heads`` is 1 and ``head_dim`` the compressed width."""

    layers: int
    heads: int
    head_dim: int
    dtype: torch.dtype
    page_size: int = 1
    v_head_dim: int | None = None

    def __post_init__(self) -> None:
        """Every dimension a positive int, and one token slot of every layer addressable (``ValueError``).

        Checked here, so that no product of them (rows times row bytes) can outgrow what an arena
        accepts and reach torch or the kernel as a wrapped-around size.
        """
        if not isinstance(self.dtype, torch.dtype):
            raise ValueError(f"KVShape.dtype must be a torch.dtype, not {self.dtype!r:.40}")
        names = ("layers", "heads", "head_dim", "page_size", *(("v_head_dim",) if self.v_head_dim is not None else ()))
        for name in names:
            limit = MAX_LAYERS if name == "layers" else ADDRESS_SPACE_LIMIT
            checked_int(f"KVShape.{name}", getattr(self, name), minimum=1, limit=limit, error=ValueError)
        v_dim = self.head_dim if self.v_head_dim is None else self.v_head_dim
        slot = self.layers * self.heads * (self.head_dim + v_dim) * self.dtype.itemsize
        if slot * self.page_size > ADDRESS_SPACE_LIMIT:
            raise ValueError(
                f"one page of {self} takes {slot * self.page_size} bytes, more than this platform can address"
            )


def checked_tokens(what: str, value: object) -> int:
    """A token count or byte budget given by the caller, as a plain non-negative int (``PoolSizingError``)."""
    return checked_int(what, value, error=PoolSizingError)


@dataclass(frozen=True)
class BufferSpec:
    """One buffer of a pool: its name and the shape and type of one token slot."""

    name: str
    row_shape: tuple[int, ...]
    dtype: torch.dtype

    @property
    def row_bytes(self) -> int:
        """Bytes of one token slot."""
        return prod(self.row_shape) * self.dtype.itemsize


def new_backend(backend: BackendName, device: int) -> Backend:
    """A fresh backend instance; the CUDA one is imported only when asked for."""
    if backend == "host":
        return HostBackend()
    from kvlog.memory.cuda_backend import CudaBackend  # noqa: PLC0415 - cuda-bindings only when asked for

    return CudaBackend(device)


def layout_cost(specs: list[BufferSpec], rows: int, granularity: int) -> int:
    """Bytes committed for ``rows`` slots of every buffer: each buffer rounds up to whole granules."""
    return sum(align_up(rows * spec.row_bytes, granularity) for spec in specs)


class ArenaBuffers(ClosesOnExit):
    """Buffers in one arena: layout, commit, sleep/wake and close; subclasses say which buffers and events."""

    def __init__(self, shape: KVShape, max_tokens: int, backend: Backend, *, label: Label | None = None) -> None:
        """Reserve regions for ``max_tokens`` slots and map the tensors; ``allocate``/``plan`` commit."""
        max_tokens = checked_tokens("max_tokens", max_tokens)
        if max_tokens % shape.page_size:
            raise PoolSizingError(f"{max_tokens} tokens is not a non-negative multiple of the page size")
        self.shape = shape
        self.label = label
        self.specs = self.buffer_specs(shape)
        self.max_tokens = max_tokens
        self.num_tokens = max_tokens
        self.state: AllocationState = "va_upper_bound"
        self._granularity = backend.granularity
        rows = self._rows(max_tokens)
        extents = [align_up(rows * spec.row_bytes, self._granularity) for spec in self.specs]
        self._offsets = [sum(extents[:index]) for index in range(len(extents))]
        self.arena = VmmArena(backend, sum(extents))
        self._full = [
            self.arena.tensor(offset, (rows, *spec.row_shape), spec.dtype, require_committed=False)
            for offset, spec in zip(self._offsets, self.specs, strict=True)
        ]
        self.buffers = list(self._full)

    @staticmethod
    def buffer_specs(shape: KVShape) -> list[BufferSpec]:
        """The pool's buffers, in arena order."""
        raise NotImplementedError

    @staticmethod
    def padding_rows(shape: KVShape) -> int:
        """Rows beyond the usable token slots: one page, the slot captured graphs pad with."""
        return shape.page_size

    @property
    def pool_name(self) -> str:
        """The name events carry."""
        return type(self).__name__

    @property
    def committed_bytes(self) -> int:
        """Physical bytes backing the pool now, by the arena's books."""
        return self.arena.committed_bytes

    @property
    def arena_ids(self) -> list[str]:
        """The arenas holding the pool."""
        return [self.arena.arena_id]

    def cost(self, num_tokens: int) -> int:
        """Bytes committed to hold ``num_tokens`` usable slots."""
        return layout_cost(self.specs, self._rows(num_tokens), self._granularity)

    def shaped_bytes(self, prefix: str, num_tokens: int | None = None) -> int:
        """Bytes of the buffers whose name starts with ``prefix``, as shaped for ``num_tokens`` (default: now)."""
        rows = self._rows(self.num_tokens if num_tokens is None else num_tokens)
        return sum(rows * spec.row_bytes for spec in self.specs if spec.name.startswith(prefix))

    def commit_tokens(self, tokens: int) -> None:
        """Back ``tokens`` usable slots of every buffer (all or none) and narrow the buffers to them."""
        self.arena.commit_many(self._ranges(self._rows(tokens)))
        self.num_tokens = tokens
        self.state = "allocated"
        self.buffers = [full[: self._rows(tokens)] for full in self._full]

    def sleep(self) -> None:
        """Give back all physical memory, keeping every tensor's address; see ``VmmArena.sleep``."""
        self.require_open()
        change = self.arena.sleep()
        emit(
            events.KvPoolSleep(
                pool=self.pool_name,
                label=self.label,
                arena_ids=self.arena_ids,
                freed_bytes=change.bookkept_bytes,
                measured_freed_bytes=change.measured_bytes,
                measurement_source=change.measurement_source,
                discrepancy_bytes=_discrepancy(change),
                duration_us=change.duration_us,
            ),
            level=_level(change),
        )

    def wake(self) -> None:
        """Back the buffers again at the same addresses; the contents come back zeroed."""
        self.require_open()
        change = self.arena.wake()
        emit(
            events.KvPoolWake(
                pool=self.pool_name,
                label=self.label,
                arena_ids=self.arena_ids,
                restored_bytes=change.bookkept_bytes,
                measured_restored_bytes=change.measured_bytes,
                measurement_source=change.measurement_source,
                discrepancy_bytes=_discrepancy(change),
                duration_us=change.duration_us,
            ),
            level=_level(change),
        )

    def close(self) -> None:
        """Drop the pool's tensors and close the arena (refused while the caller still holds a buffer)."""
        self._full, self.buffers = [], []
        self.arena.close()

    @contextmanager
    def closed_on_failure(self) -> Iterator[None]:
        """Close the pool if the block raises, so that a failed construction leaks no reservation."""
        try:
            yield
        except BaseException:
            self.close()
            raise

    def require_open(self) -> None:
        """Refuse to work on a closed pool."""
        if self.arena.closed:
            raise PoolStateError(f"{self.pool_name} is closed")

    def announce(self) -> None:
        """Emit this pool's allocation event for its current state."""
        raise NotImplementedError

    def _rows(self, num_tokens: int) -> int:
        return num_tokens + self.padding_rows(self.shape)

    def _ranges(self, rows: int) -> list[tuple[int, int]]:
        return [(offset, rows * spec.row_bytes) for offset, spec in zip(self._offsets, self.specs, strict=True)]


class KVPool(ArenaBuffers):
    """A device KV pool: the eager and the post-capture lifecycle."""

    @classmethod
    def allocate(
        cls,
        shape: KVShape,
        *,
        num_tokens: int | None = None,
        budget_bytes: int | None = None,
        label: Label | None = None,
        backend: BackendName = "host",
        device: int = 0,
    ) -> Self:
        """Eager lifecycle: ``num_tokens`` slots, or as many as ``budget_bytes`` buys, committed now."""
        if (num_tokens is None) == (budget_bytes is None):
            raise ValueError("give exactly one of num_tokens and budget_bytes")
        if budget_bytes is not None:
            budget_bytes = checked_tokens("budget_bytes", budget_bytes)
        else:
            num_tokens = checked_tokens("num_tokens", num_tokens)
        memory = new_backend(backend, device)
        if budget_bytes is not None:
            specs, padding = cls.buffer_specs(shape), cls.padding_rows(shape)
            most = budget_bytes // sum(spec.row_bytes for spec in specs)
            num_tokens = largest_fitting(
                lambda tokens: layout_cost(specs, tokens + padding, memory.granularity),
                budget_bytes,
                shape.page_size,
                most,
            )
        assert num_tokens is not None
        pool = cls(shape, num_tokens, memory, label=label)
        with pool.closed_on_failure():
            pool.commit_tokens(num_tokens)
        pool.announce()
        return pool

    @classmethod
    def plan(
        cls,
        shape: KVShape,
        upper_bound_tokens: int,
        *,
        label: Label | None = None,
        backend: BackendName = "host",
        device: int = 0,
    ) -> Self:
        """Post-capture lifecycle, first half: address space for the upper bound, the first page backed."""
        upper_bound_tokens = checked_tokens("upper_bound_tokens", upper_bound_tokens)
        upper = upper_bound_tokens - upper_bound_tokens % shape.page_size
        pool = cls(shape, upper, new_backend(backend, device), label=label)
        with pool.closed_on_failure():
            pool.arena.commit_many(pool._ranges(pool._rows(0)))
        pool.announce()
        return pool

    def size_for(self, budget_bytes: int) -> int:
        """The token count ``budget_bytes`` buys, capped at the upper bound."""
        return largest_fitting(self.cost, budget_bytes, self.shape.page_size, self.max_tokens)

    def free_bytes(self) -> int:
        """Memory this pool's backend could still get (CUDA free memory, or the host's MemAvailable)."""
        return free_memory_bytes(self.arena.backend.name, self.arena.backend.device)

    def finalize(
        self, budget_bytes: int | None = None, *, free_bytes: int | None = None, headroom_bytes: int = 0
    ) -> int:
        """Post-capture lifecycle, second half: commit what the budget allows; return the token count.

        Without ``budget_bytes`` the budget is sglang's: free memory (measured unless ``free_bytes``
        is given) minus ``headroom_bytes``, plus what the pool already holds.
        """
        self.require_planned()
        free, budget = sized_budget(
            budget_bytes, free_bytes, headroom_bytes, free_now=self.free_bytes, committed=self.committed_bytes
        )
        tokens = self.size_for(budget)
        self.commit_tokens(tokens)
        emit(
            events.KvPoolPostCaptureSized(
                pool=self.pool_name,
                label=None,
                dtype=str(self.shape.dtype),
                max_total_num_tokens=tokens,
                free_bytes=free,
                budget_bytes=budget,
                committed_bytes=self.committed_bytes,
            )
        )
        self.announce()
        return tokens

    def revert_to_plan(self) -> None:
        """Undo a growth that no view has used yet: back to the first page and the upper-bound views."""
        first = self._rows(0)
        grown: list[tuple[int, int]] = []
        for offset, spec, full in zip(self._offsets, self.specs, self._full, strict=True):
            kept = align_up(first * spec.row_bytes, self._granularity)
            region = align_up(full.shape[0] * spec.row_bytes, self._granularity)
            if region > kept:
                grown.append((offset + kept, region - kept))
        if grown:
            self.arena.decommit_many(grown, force=True)  # one kv_arena.decommit for the whole pool
        self.num_tokens = self.max_tokens
        self.state = "va_upper_bound"
        self.buffers = list(self._full)

    def require_planned(self) -> None:
        """Refuse to size a pool twice."""
        self.require_open()
        if self.state != "va_upper_bound":
            raise PoolStateError(f"{self.pool_name} is already sized ({self.num_tokens} tokens); finalize runs once")


class SeparateKV:
    """``k_buffer`` and ``v_buffer`` over buffers laid out K of every layer, then V of every layer."""

    buffers: list[torch.Tensor]
    shape: KVShape

    @property
    def k_buffer(self) -> list[torch.Tensor]:
        """K of each layer."""
        return self.buffers[: self.shape.layers]

    @property
    def v_buffer(self) -> list[torch.Tensor]:
        """V of each layer."""
        return self.buffers[self.shape.layers :]


class MHAKVPool(SeparateKV, KVPool):
    """Per layer a K buffer ``[rows, heads, head_dim]`` and a V buffer ``[rows, heads, v_head_dim]``."""

    @staticmethod
    def buffer_specs(shape: KVShape) -> list[BufferSpec]:
        """K of every layer, then V of every layer."""
        v_dim = shape.head_dim if shape.v_head_dim is None else shape.v_head_dim
        return [
            *(BufferSpec(f"k{layer}", (shape.heads, shape.head_dim), shape.dtype) for layer in range(shape.layers)),
            *(BufferSpec(f"v{layer}", (shape.heads, v_dim), shape.dtype) for layer in range(shape.layers)),
        ]

    def announce(self) -> None:
        """``kv_pool.allocation`` with K and V sizes as shaped and the bytes really committed."""
        emit(
            events.KvPoolAllocation(
                pool=self.pool_name,
                label=self.label,
                layout="mha",
                allocation_state=self.state,
                dtype=str(self.shape.dtype),
                num_tokens=self.num_tokens,
                k_bytes=self.shaped_bytes("k"),
                v_bytes=self.shaped_bytes("v"),
                committed_bytes=self.committed_bytes,
                arena_ids=self.arena_ids,
            )
        )


class MLAKVPool(KVPool):
    """Per layer one compressed KV buffer ``[rows, 1, kv_lora_rank + qk_rope_head_dim]`` (``heads`` = 1)."""

    @staticmethod
    def buffer_specs(shape: KVShape) -> list[BufferSpec]:
        """One buffer per layer."""
        if shape.v_head_dim is not None:
            raise ValueError("an MLA pool has no separate V buffer; leave v_head_dim unset")
        return [BufferSpec(f"kv{layer}", (shape.heads, shape.head_dim), shape.dtype) for layer in range(shape.layers)]

    @property
    def kv_buffer(self) -> list[torch.Tensor]:
        """KV of each layer."""
        return self.buffers

    def announce(self) -> None:
        """``kv_pool.allocation`` with the KV size as shaped and the bytes really committed."""
        emit(
            events.KvPoolAllocation(
                pool=self.pool_name,
                label=self.label,
                layout="mla",
                allocation_state=self.state,
                dtype=str(self.shape.dtype),
                num_tokens=self.num_tokens,
                kv_bytes=self.shaped_bytes("kv"),
                committed_bytes=self.committed_bytes,
                arena_ids=self.arena_ids,
            )
        )


class HostKVPool(SeparateKV, ArenaBuffers):
    """Host memory for a hierarchical (HiCache) KV cache: per-layer K and V buffers in a host arena.

    Sized as sglang sizes it: a token count, a host size in decimal GB (``--hicache-size``), or a
    ratio of a device pool (``--hicache-ratio``). Host pools have no padding page and are eager. The
    memory is pinned (page-locked for the GPU) when torch sees a CUDA device, unless ``pin=False``.
    """

    buffer_specs = staticmethod(MHAKVPool.buffer_specs)

    def __init__(
        self,
        shape: KVShape,
        *,
        num_tokens: int | None = None,
        size_gb: float | None = None,
        device_pool: KVPool | None = None,
        ratio: float | None = None,
        label: Literal["kv", "full", "swa"] = "kv",
        pin: bool | None = None,
    ) -> None:
        """Size, reserve, commit (and pin) the host pool now, then emit ``kv_host_pool.allocation``."""
        if sum((num_tokens is not None, size_gb is not None, device_pool is not None)) != 1 or (
            (device_pool is None) != (ratio is None)
        ):
            raise ValueError("give exactly one of num_tokens, size_gb, or device_pool with ratio")
        if size_gb is not None:
            host_bytes = _scaled("size_gb", size_gb, GB)
            num_tokens = host_bytes // sum(spec.row_bytes for spec in self.buffer_specs(shape))
        elif device_pool is not None and ratio is not None:
            num_tokens = _scaled("ratio", ratio, device_pool.num_tokens)
        num_tokens = checked_tokens("num_tokens", num_tokens)
        tokens = num_tokens - num_tokens % shape.page_size
        if tokens <= 0:
            raise PoolSizingError(f"a host pool of {num_tokens} tokens holds no page of {shape.page_size} tokens")
        self.host_label = label
        self._pin = torch.cuda.is_available() if pin is None else pin
        self._pinned = PinnedRanges()
        super().__init__(shape, tokens, HostBackend())
        with self.closed_on_failure():
            self.commit_tokens(tokens)
            self._pin_committed()
        self.announce()

    @property
    def pinned(self) -> bool:
        """Whether the pool's memory is page-locked for the GPU now."""
        return bool(self._pinned)

    def sleep(self) -> None:
        """Unpin, then give the memory back (see ``ArenaBuffers.sleep``)."""
        self._pinned.unpin()
        super().sleep()

    def wake(self) -> None:
        """Back the memory again, then pin it again."""
        super().wake()
        self._pin_committed()

    def close(self) -> None:
        """Unpin, then close."""
        self._pinned.unpin()
        super().close()

    def _pin_committed(self) -> None:
        if self._pin:
            self._pinned.pin([(self.arena.base + start, end - start) for start, end in self.arena.committed_runs])

    @staticmethod
    def padding_rows(shape: KVShape) -> int:
        """None: only device pools pad for captured graphs."""
        return 0

    def announce(self) -> None:
        """``kv_host_pool.allocation`` with the host bytes really committed."""
        emit(
            events.KvHostPoolAllocation(
                label=self.host_label, num_tokens=self.num_tokens, host_bytes=self.committed_bytes
            )
        )


def sized_budget(
    budget_bytes: object, free_bytes: object, headroom_bytes: object, *, free_now: Callable[[], int], committed: int
) -> tuple[int, int]:
    """``finalize``'s free memory and budget: the caller's figures (checked) or sglang's rule.

    Without a budget it is the free memory (``free_now()`` unless given) minus the headroom plus
    what the pool already holds.
    """
    headroom = checked_tokens("headroom_bytes", headroom_bytes)
    free = free_now() if free_bytes is None else checked_tokens("free_bytes", free_bytes)
    if budget_bytes is None:
        return free, free - headroom + committed
    return free, checked_tokens("budget_bytes", budget_bytes)


def _positive_number(what: str, value: object) -> float:
    """A size in GB or a ratio: a finite number above 0 (``PoolSizingError``)."""
    if not json_number(value) or not math.isfinite(value) or value <= 0:
        raise PoolSizingError(f"{what} must be a finite number above 0, not {value!r:.40}")
    return float(value)


def _scaled(what: str, value: object, unit: int) -> int:
    """``value`` (a size in GB, a ratio) times ``unit``, as a whole number (``PoolSizingError``).

    A finite number can still overflow a float once scaled (1e300 GB): that is a size no host has,
    refused like any other, never an ``OverflowError`` from ``round``.
    """
    scaled = _positive_number(what, value) * unit
    if not math.isfinite(scaled):
        raise PoolSizingError(f"{what} {value!r:.40} is beyond any size a host has")
    return round(scaled) if unit == GB else int(scaled)


def _discrepancy(change: ArenaChange) -> int | None:
    return None if change.measured_bytes is None else change.measured_bytes - change.bookkept_bytes


def _level(change: ArenaChange) -> Literal["info", "warning"]:
    return "warning" if _discrepancy(change) else "info"
