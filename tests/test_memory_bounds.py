"""Hostile sizes and offsets at every public entry point of the memory runtime (issue 9, item 14).

ctypes converts a Python int to ``size_t`` modulo 2**64: before the fix ``VmmArena.host(2**64)``
reserved 8 KiB and claimed 16 EiB, and a commit then handed out another mapping's bytes. Here the
backend's libc is replaced by a spy that checks every system call against what the platform can
address and against the reservations the spy saw being made, and fails the test (instead of letting
the kernel corrupt the process) when a call would touch anything else. Commits above a few MiB are
answered ENOMEM by the spy, as a full machine would, so that hypothesis never holds real memory.

The contract: an entry point either works, or raises ``ArenaError`` (the arena and its backends),
``PoolSizingError`` (a pool's token counts and budgets) or ``ValueError`` (a ``KVShape``) with a
message naming the value; nothing else, and never a system call with a wrapped-around value.
"""

from __future__ import annotations

import ctypes
import errno
import gc
import platform
from collections.abc import Callable, Iterator
from mmap import PROT_WRITE
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from memory_helpers import validated_events

from kvlog.memory import (
    ArenaError,
    BackendError,
    HostBackend,
    HostKVPool,
    KVShape,
    MHAKVPool,
    PoolSizingError,
    SWAKVPool,
    VmmArena,
    host_backend,
)
from kvlog.memory.host_backend import MAP_FIXED, PAGE_SIZE

P = PAGE_SIZE
SIZE_MAX = (1 << (8 * ctypes.sizeof(ctypes.c_size_t))) - 1
# User address space the kernel hands out: 47 bits on x86-64 (4-level paging), 48 on arm64.
ADDRESS_SPACE_LIMIT = 1 << {"aarch64": 48, "arm64": 48}.get(platform.machine().lower(), 47)
COMMIT_CAP = 8 << 20  # the spy answers ENOMEM above this, so that no example holds real memory
#: refusals that name what was wrong; BackendError is the spy's own ENOMEM above COMMIT_CAP, said as the
#: kernel's would be (a call outside a reservation fails the spy's assertion first, whatever is raised)
ALLOWED = (ArenaError, PoolSizingError, BackendError)

# Values around every limit a size or offset meets, and values that are not sizes at all.
EDGES = [
    0,
    1,
    -1,
    P - 1,
    P,
    P + 1,
    3 * P,
    1 << 20,
    (1 << 31) - 1,
    1 << 31,
    (1 << 32) + P,
    (1 << 63) - 1,
    1 << 63,
    SIZE_MAX,
    SIZE_MAX + 1,
    1 << 64,
    (1 << 64) + 2 * P,
    1 << 70,
    ADDRESS_SPACE_LIMIT - P,
    ADDRESS_SPACE_LIMIT,
    ADDRESS_SPACE_LIMIT + P,
    -(1 << 64),
]
NOT_SIZES = [True, False, 4096.0, 0.5, float("nan"), float("inf"), -float("inf"), None, "4096", b"\x10", [4096]]
hostile = st.one_of(
    st.sampled_from(EDGES),
    st.sampled_from(NOT_SIZES),
    st.integers(min_value=-(1 << 80), max_value=1 << 80),
    st.integers(min_value=0, max_value=1 << 24),
)
SETTINGS = settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


class SpyLibc:
    """libc for the host backend, checking each call's sizes and addresses before the kernel sees them."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.reservations: dict[int, int] = {}  # outer start -> outer size, as mmap(NULL, ...) returned
        self.calls = 0

    def _inside(self, call: str, address: int, size: int) -> None:
        assert isinstance(address, int) and isinstance(size, int), f"{call}({address!r}, {size!r})"
        assert 0 < size <= ADDRESS_SPACE_LIMIT, f"{call} of {size} bytes: wrapped around or unaddressable"
        assert any(start <= address and address + size <= start + n for start, n in self.reservations.items()), (
            f"{call}({address:#x}, {size}) touches memory that no reservation of the backend holds"
        )

    def mmap(self, address: int | None, size: int, prot: int, flags: int, fd: int, offset: int) -> Any:
        self.calls += 1
        if address is None:
            assert isinstance(size, int) and 0 < size <= ADDRESS_SPACE_LIMIT, f"mmap(NULL, {size!r}): truncated"
            result = self._real.mmap(address, size, prot, flags, fd, offset)
            if result not in (None, host_backend._MAP_FAILED):
                self.reservations[result] = size
            return result
        assert flags & MAP_FIXED, "a hinted mmap that is not MAP_FIXED"
        self._inside("mmap(MAP_FIXED)", address, size)
        return self._real.mmap(address, size, prot, flags, fd, offset)

    def mprotect(self, address: int, size: int, prot: int) -> int:
        self.calls += 1
        self._inside("mprotect", address, size)
        if prot & PROT_WRITE and size > COMMIT_CAP:
            ctypes.set_errno(errno.ENOMEM)
            return -1
        return int(self._real.mprotect(address, size, prot))

    def madvise(self, address: int, size: int, advice: int) -> int:
        self.calls += 1
        self._inside("madvise", address, size)
        return int(self._real.madvise(address, size, advice))

    def munmap(self, address: int, size: int) -> int:
        self.calls += 1
        assert self.reservations.get(address) == size, f"munmap({address:#x}, {size}) is not a whole reservation"
        del self.reservations[address]
        return int(self._real.munmap(address, size))


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Iterator[SpyLibc]:
    """The spy in place of the backend's libc for one test; everything the test made is closed after it."""
    libc = SpyLibc(host_backend._libc)
    monkeypatch.setattr(host_backend, "_libc", libc)
    with validated_events():
        yield libc
    gc.collect()


def outcome(action: Callable[[], object]) -> object:
    """Run ``action``; an allowed refusal must name what was wrong, anything else fails the test.

    ``ValueError`` is allowed only for the documented "give exactly one of" of the pools' options
    (a hostile ``None`` leaves none given).
    """
    try:
        return action()
    except ALLOWED as refused:
        assert str(refused), "a refusal without a reason"
        return refused
    except ValueError as refused:
        if type(refused) is not ValueError or "exactly one" not in str(refused):
            raise
        return refused


def close_all(*things: object) -> None:
    for thing in things:
        close = getattr(thing, "close", None)
        if close is not None:
            close()


@pytest.mark.parametrize(
    ("reserve", "granularity", "reason"),
    [
        (1 << 64, None, "reserve_bytes 18446744073709551616 is larger than"),
        (1 << 70, None, "is larger than"),
        (SIZE_MAX, None, "is larger than"),
        (ADDRESS_SPACE_LIMIT + 1, None, "is larger than"),
        (-P, None, "must be at least 1"),
        (0, None, "must be at least 1"),
        (True, None, "not the bool"),
        (4096.0, None, "not float"),
        ("4096", None, "not str"),
        (1 << 20, 1 << 64, "granularity_bytes 18446744073709551616 is larger than"),
        (1 << 20, 3 * P, "not a power of two"),
        (1 << 20, P + 1, "not a multiple of the page size"),
        (1 << 20, 0, "must be at least 1"),
        (1 << 20, -P, "must be at least 1"),
        (1 << 20, True, "not the bool"),
        (1 << 20, 8192.0, "not float"),
    ],
)
def test_a_reservation_or_granularity_the_platform_cannot_address_is_refused_before_any_system_call(
    spy: SpyLibc, reserve: Any, granularity: Any, reason: str
) -> None:
    with pytest.raises(ArenaError, match=reason):
        VmmArena.host(reserve, granularity_bytes=granularity)
    assert spy.calls == 0


def test_a_reservation_whose_guard_pages_would_pass_the_address_space_is_refused(spy: SpyLibc) -> None:
    with validated_events() as captured, pytest.raises(ArenaError, match="is larger than"):
        VmmArena.host(ADDRESS_SPACE_LIMIT - 1, granularity_bytes=1 << 21)
    assert spy.calls == 0
    assert captured[-1]["event"] == "kv_arena.error" and captured[-1]["operation"] == "reserve"


@SETTINGS
@given(reserve=hostile, granularity=st.one_of(st.none(), hostile))
def test_hostile_reservations_either_work_or_are_refused(spy: SpyLibc, reserve: Any, granularity: Any) -> None:
    arena = outcome(lambda: VmmArena.host(reserve, granularity_bytes=granularity))
    if isinstance(arena, VmmArena):
        assert arena.reserved_va_bytes >= reserve and arena.reserved_va_bytes % arena.granularity_bytes == 0
        arena.close()


@SETTINGS
@given(offset=hostile, nbytes=hostile, second=st.tuples(hostile, hostile))
def test_hostile_commits_and_decommits_either_work_or_are_refused_and_the_books_stay_true(
    spy: SpyLibc, offset: Any, nbytes: Any, second: tuple[Any, Any]
) -> None:
    with VmmArena.host(64 * P) as arena:
        for action in (
            lambda: arena.commit(offset, nbytes),
            lambda: arena.commit_many([(offset, nbytes), second]),
            lambda: arena.commit_many([(0, P), second, (offset, nbytes)]),
            lambda: arena.decommit(offset, nbytes),
            lambda: arena.decommit(*second, force=True),
        ):
            outcome(action)
            assert 0 <= arena.committed_bytes <= arena.reserved_va_bytes
            assert arena.committed_bytes == sum(end - start for start, end in arena.committed_runs)
            measured = arena.measure()
            assert measured is not None and measured.nbytes == arena.committed_bytes


@pytest.mark.parametrize("ranges", [None, 5, [(0,)], [(0, P, 1)], [0, P], "ab", [("0", P)]])
def test_commit_many_refuses_what_is_not_a_list_of_pairs(spy: SpyLibc, ranges: Any) -> None:
    with VmmArena.host(16 * P) as arena, pytest.raises(ArenaError, match="commit refused"):
        arena.commit_many(ranges)
    assert spy.calls == 3  # the reservation (mmap, mprotect) and its release (munmap): nothing between


@SETTINGS
@given(
    offset=hostile, dims=st.lists(hostile, min_size=0, max_size=3), dtype=st.sampled_from([torch.uint8, torch.float64])
)
def test_hostile_views_either_lie_inside_the_reservation_or_are_refused(
    spy: SpyLibc, offset: Any, dims: list[Any], dtype: torch.dtype
) -> None:
    with VmmArena.host(16 * P) as arena:
        arena.commit(0, 16 * P)
        view = outcome(lambda: arena.tensor(offset, tuple(dims), dtype))
        if isinstance(view, torch.Tensor):
            assert arena.base <= view.data_ptr() and view.data_ptr() + view.nbytes <= arena.base + 16 * P
            view.fill_(1)
            del view


def test_a_view_with_a_shape_or_dtype_that_is_not_one_is_refused(spy: SpyLibc) -> None:
    with VmmArena.host(16 * P) as arena:
        arena.commit(0, 16 * P)
        for shape, dtype in [([4], torch.uint8), ((-1, -1), torch.uint8), ((4,), "uint8"), ((True,), torch.uint8)]:
            with pytest.raises(ArenaError, match=r"tensor refused|must be a"):
                arena.tensor(0, shape, dtype)  # type: ignore[arg-type]


@SETTINGS
@given(granularity=hostile, address=hostile, nbytes=hostile)
@example(granularity=1 << 20, address=0, nbytes=16 << 20)  # a whole reservation above COMMIT_CAP: ENOMEM
def test_hostile_calls_on_a_host_backend_never_reach_the_kernel_outside_its_reservations(
    spy: SpyLibc, granularity: Any, address: Any, nbytes: Any
) -> None:
    backend = outcome(lambda: HostBackend(granularity))
    if not isinstance(backend, HostBackend) or backend.granularity > 1 << 24:
        backend = HostBackend()
    base = backend.reserve(16 * backend.granularity)
    for action in (
        lambda: backend.map(address, nbytes),
        lambda: backend.map(base + address if isinstance(address, int) else address, nbytes),
        lambda: backend.unmap(address, nbytes),
        lambda: backend.tensor(address, (nbytes,) if isinstance(nbytes, int) else (1,), torch.uint8),
        lambda: backend.release(address, nbytes),
        lambda: backend.reserve(nbytes),
    ):
        result = outcome(action)
        if isinstance(result, int) and result != base:  # a reservation the hostile size made
            backend.release(result, nbytes)
    backend.release(base, 16 * backend.granularity)


SHAPE_FIELDS = ("layers", "heads", "head_dim", "page_size", "v_head_dim")


@SETTINGS
@given(field=st.sampled_from(SHAPE_FIELDS), value=hostile)
def test_hostile_model_shapes_are_refused_with_value_error_or_build_a_pool(
    spy: SpyLibc, field: str, value: Any
) -> None:
    sizes: dict[str, Any] = {"layers": 2, "heads": 2, "head_dim": 8, "page_size": 1, field: value}
    try:
        shape = KVShape(dtype=torch.float16, **sizes)
    except ValueError as refused:
        assert field in str(refused) or "page of" in str(refused)
        return
    pool = outcome(lambda: MHAKVPool.plan(shape, 64 * shape.page_size))
    close_all(pool)


@SETTINGS
@given(value=hostile, which=st.sampled_from(["num_tokens", "budget_bytes", "upper", "finalize", "free", "headroom"]))
def test_hostile_token_counts_and_budgets_are_refused_or_size_a_pool(spy: SpyLibc, value: Any, which: str) -> None:
    shape = KVShape(layers=2, heads=2, head_dim=8, dtype=torch.float16, page_size=4)
    if which in ("num_tokens", "budget_bytes"):
        close_all(outcome(lambda: MHAKVPool.allocate(shape, **{which: value})))
        return
    if which == "upper":
        close_all(outcome(lambda: MHAKVPool.plan(shape, value)))
        return
    with MHAKVPool.plan(shape, 1024) as pool:
        keyword = {"finalize": "budget_bytes", "free": "free_bytes", "headroom": "headroom_bytes"}[which]
        figures = {"free_bytes": 1 << 20, keyword: value}
        outcome(lambda: pool.finalize(**figures))
        assert pool.committed_bytes == sum(end - start for start, end in pool.arena.committed_runs)


@SETTINGS
@given(value=st.one_of(hostile, st.floats()), which=st.sampled_from(["num_tokens", "size_gb", "ratio"]))
@example(value=1.797693134862316e299, which="size_gb")  # finite, but beyond a float once times 2**30
@example(value=1.7e308, which="ratio")
def test_hostile_host_pool_sizes_are_refused_or_size_a_pool(spy: SpyLibc, value: Any, which: str) -> None:
    shape = KVShape(layers=2, heads=2, head_dim=8, dtype=torch.float16)
    with MHAKVPool.allocate(shape, num_tokens=64) as device_pool:
        sizing = {"device_pool": device_pool, "ratio": value} if which == "ratio" else {which: value}
        close_all(outcome(lambda: HostKVPool(shape, pin=False, **sizing)))


@SETTINGS
@given(full=hostile, swa=hostile)
def test_hostile_sliding_window_pools_are_refused_or_built(spy: SpyLibc, full: Any, swa: Any) -> None:
    shape = KVShape(layers=1, heads=2, head_dim=8, dtype=torch.float16)
    pool = outcome(lambda: SWAKVPool.plan(shape, shape, full_upper_bound_tokens=full, swa_upper_bound_tokens=swa))
    close_all(pool)
