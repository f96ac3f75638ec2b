"""The CUDA backend on a real GPU: every byte the driver reports is the byte the arena bookkeeps.

These tests run on the device machine (``pytest -m cuda``). Without a GPU or cuda-bindings they skip,
unless ``KVLOG_REQUIRE_CUDA=1`` says a GPU must be there, in which case a missing one is a failure.
Free-memory deltas are read straight from ``cuMemGetInfo``, never from the backend under test, and
no new kernel is launched inside a measured window (lazy module loading would allocate).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from memory_helpers import gpu_or_skip, last, validated_events

pytestmark = pytest.mark.cuda

GiB = 1 << 30
MiB = 1 << 20


torch, driver = gpu_or_skip()

from kvlog.memory import (  # noqa: E402
    ArenaError,
    BackendError,
    KVShape,
    MHAKVPool,
    MLAKVPool,
    SWAKVPool,
    VmmArena,
    cuda_backend,
)
from kvlog.memory.cuda_backend import CudaBackend  # noqa: E402


def driver_free() -> int:
    """Free device memory straight from the driver, in the primary context torch made current."""
    err, free, _total = driver.cuMemGetInfo()
    assert err == driver.CUresult.CUDA_SUCCESS, err
    return int(free)


def settled_free() -> int:
    """``driver_free`` once torch's caching allocator has handed back what earlier tensors left cached."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return driver_free()


@pytest.fixture(scope="module", autouse=True)
def warm_cuda() -> None:
    """Initialise torch's context and load the kernels the tests use before anything is measured.

    Lazy module loading allocates device memory (about 90 MiB) at a kernel's first launch.
    """
    probe = torch.zeros(1 << 20, dtype=torch.float16, device="cuda")
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.uint8):
        warm = probe.to(dtype)
        warm.fill_(1)
        warm.copy_(warm * 2 + 1)
        assert bool(torch.equal(warm, warm.clone()))
        warm.cpu()
    torch.arange(8, device="cuda", dtype=torch.float32).view(torch.uint8).sum()
    torch.cuda.synchronize()


@pytest.fixture
def backend() -> Iterator[CudaBackend]:
    yield CudaBackend(0)


def test_granularity_is_the_drivers_and_two_mib_on_h200(backend: CudaBackend) -> None:
    prop = driver.CUmemAllocationProp()
    prop.type = driver.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = 0
    err, minimum = driver.cuMemGetAllocationGranularity(
        prop, driver.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM
    )
    assert err == driver.CUresult.CUDA_SUCCESS
    assert backend.granularity == minimum
    if "H200" in torch.cuda.get_device_name(0):
        assert backend.granularity == 2 * MiB
    assert backend.name == "cuda"
    assert backend.handle_type == "NONE"


def test_reserving_one_tib_costs_no_device_memory(backend: CudaBackend) -> None:
    before = driver_free()
    base = backend.reserve(1 << 40)
    assert driver_free() == before
    assert base % backend.granularity == 0
    measured = backend.measure(base, 1 << 40)
    assert measured is not None
    assert (measured.nbytes, measured.source) == (0, "cuMemGetInfo")
    backend.release(base, 1 << 40)
    assert driver_free() == before


def test_commits_in_steps_match_the_drivers_free_memory(backend: CudaBackend) -> None:
    g = backend.granularity
    steps = [g, 3 * g, 64 * MiB, 190 * MiB, 1 * GiB, 3 * GiB]
    steps.append(8 * GiB - sum(steps))
    base = backend.reserve(16 * GiB)
    before = driver_free()
    offset = 0
    for calls, nbytes in enumerate(steps, start=1):
        backend.map(base + offset, nbytes)
        offset += nbytes
        delta = before - driver_free()
        # The driver may spend page-table memory on new mappings: at most one granule per allocation.
        assert offset <= delta <= offset + calls * g, (offset, delta)
        measured = backend.measure(base, 16 * GiB)
        assert measured is not None
        assert measured.nbytes == delta
    assert offset == 8 * GiB
    # One handle per granule: any granule-aligned subrange inside a commit can be given back.
    middle = base + 5 * GiB + 7 * g
    backend.unmap(middle, 3 * g)
    delta = before - driver_free()
    assert 8 * GiB - 3 * g <= delta <= 8 * GiB - 3 * g + len(steps) * g
    backend.map(middle, 3 * g)
    backend.unmap(base, 8 * GiB)
    assert driver_free() == before
    measured = backend.measure(base, 16 * GiB)
    assert measured is not None
    assert measured.nbytes == 0
    backend.release(base, 16 * GiB)


def test_out_of_memory_mid_commit_rolls_back_exactly(backend: CudaBackend) -> None:
    """Fill the GPU with torch until 3 GiB are left, then commit 8 GiB: cuMemCreate really fails."""
    hog = torch.empty(driver_free() - 3 * GiB, dtype=torch.uint8, device="cuda")
    try:
        base = backend.reserve(16 * GiB)
        before = driver_free()
        assert before < 8 * GiB
        with pytest.raises(BackendError) as failure:
            backend.map(base, 8 * GiB)
        assert failure.value.call == "cuMemCreate"
        assert failure.value.code == "CUDA_ERROR_OUT_OF_MEMORY"
        assert driver_free() == before
        measured = backend.measure(base, 16 * GiB)
        assert measured is not None
        assert measured.nbytes == 0
        # Nothing of the failed call is left behind: the same range maps and unmaps cleanly.
        backend.map(base, GiB)
        backend.unmap(base, GiB)
        assert driver_free() == before
        backend.release(base, 16 * GiB)
    finally:
        del hog
        torch.cuda.empty_cache()


class FaultyDriver:
    """The real driver module, except that each named call fails once, after ``n`` calls that succeed.

    Only for faults the driver cannot be made to produce for real: a refused access grant or unmap.
    """

    def __init__(self, **after: int) -> None:
        self._after = after

    def __getattr__(self, name: str) -> Any:
        call = getattr(driver, name)
        if name not in self._after:
            return call

        def faulty(*args: Any) -> Any:
            if self._after[name] == 0:
                del self._after[name]
                return (driver.CUresult.CUDA_ERROR_UNKNOWN,)
            self._after[name] -= 1
            return call(*args)

        return faulty


def test_a_refused_access_grant_rolls_back_and_a_refused_rollback_stays_recoverable(
    backend: CudaBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = backend.granularity
    base = backend.reserve(8 * g)
    before = driver_free()
    monkeypatch.setattr(cuda_backend, "driver", FaultyDriver(cuMemSetAccess=0))
    with pytest.raises(BackendError) as failure:
        backend.map(base, 4 * g)
    assert (failure.value.call, failure.value.code) == ("cuMemSetAccess", "CUDA_ERROR_UNKNOWN")
    assert driver_free() == before
    measured = backend.measure(base, 8 * g)
    assert measured is not None and measured.nbytes == 0

    # The grant fails and so does the rollback's first unmap: all four granules stay mapped, and
    # the backend keeps them on its books and in its measurement so that unmap() can give them back.
    monkeypatch.setattr(cuda_backend, "driver", FaultyDriver(cuMemSetAccess=0, cuMemUnmap=0))
    with pytest.raises(BackendError, match=r"cuMemUnmap \(rolling back after cuMemSetAccess\) failed"):
        backend.map(base, 4 * g)
    measured = backend.measure(base, 8 * g)
    assert measured is not None and measured.nbytes == 4 * g == before - driver_free()
    monkeypatch.undo()
    backend.unmap(base, 4 * g)
    assert driver_free() == before
    backend.release(base, 8 * g)


def test_tensors_are_zero_copy_and_kernels_read_what_kernels_wrote(backend: CudaBackend) -> None:
    g = backend.granularity
    base = backend.reserve(8 * g)
    backend.map(base, 4 * g)
    halves = backend.tensor(base, (4 * g // 2,), torch.bfloat16)
    assert halves.data_ptr() == base
    assert halves.device == torch.device("cuda", 0)
    halves.copy_(torch.arange(halves.numel(), device="cuda").to(torch.bfloat16))
    # A second view at an offset aliases the first: writes through one are read through the other.
    words = backend.tensor(base + g, (g // 4,), torch.float32)
    assert words.data_ptr() == base + g
    expected = halves[g // 2 : g].clone().view(torch.float32)
    assert torch.equal(words, expected)
    words.fill_(3.5)
    assert torch.equal(halves[g // 2 : g].view(torch.float32), torch.full_like(words, 3.5))
    reference = torch.arange(g // 2, device="cuda").to(torch.bfloat16)
    assert torch.equal(halves[: g // 2], reference)
    assert torch.equal(halves[: g // 2].cpu(), reference.cpu())
    grid = backend.tensor(base, (2, 3, 4), torch.float16)
    assert grid.shape == (2, 3, 4) and grid.is_contiguous()
    del halves, words, grid, expected, reference
    backend.unmap(base, 4 * g)
    backend.release(base, 8 * g)


def test_a_cuda_graph_captured_before_growth_replays_after_it(backend: CudaBackend) -> None:
    """Committing more of a reservation never moves what a captured graph points at."""
    g = backend.granularity
    base = backend.reserve(64 * g)
    backend.map(base, 2 * g)
    source = backend.tensor(base, (g // 4,), torch.float32)
    target = backend.tensor(base + g, (g // 4,), torch.float32)
    source.fill_(1.0)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        target.copy_(source * 2 + 1)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        target.copy_(source * 2 + 1)
    backend.map(base + 2 * g, 62 * g)
    source.fill_(5.0)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(target, torch.full_like(target, 11.0))
    del graph, source, target
    backend.unmap(base, 64 * g)
    backend.release(base, 64 * g)


def test_concurrent_maps_from_threads_keep_exact_accounting(backend: CudaBackend) -> None:
    g = backend.granularity
    threads_n, per_thread = 8, 32 * g
    base = backend.reserve(threads_n * per_thread)
    before = driver_free()

    def commit(index: int) -> None:
        for step in range(0, per_thread, 4 * g):
            backend.map(base + index * per_thread + step, 4 * g)

    with ThreadPoolExecutor(threads_n) as pool:
        for done in [pool.submit(commit, i) for i in range(threads_n)]:
            done.result()
    delta = before - driver_free()
    assert threads_n * per_thread <= delta <= threads_n * per_thread + threads_n * 8 * g
    measured = backend.measure(base, threads_n * per_thread)
    assert measured is not None
    assert measured.nbytes == delta
    backend.unmap(base, threads_n * per_thread)
    assert driver_free() == before
    backend.release(base, threads_n * per_thread)


def test_coarser_granules_are_one_handle_each_even_when_not_a_power_of_two() -> None:
    with pytest.raises(ArenaError, match="not a multiple of the driver's minimum granularity"):
        CudaBackend(0, granularity_bytes=3 * MiB)
    backend = CudaBackend(0, granularity_bytes=10 * MiB)
    g = backend.granularity
    assert g == 10 * MiB
    with validated_events() as captured, VmmArena(backend, reserve_bytes=GiB) as arena:
        assert last(captured, "kv_arena.ready")["granularity_bytes"] == g
        before = driver_free()
        arena.commit(g + 1, 2 * g)  # rounds outwards to three granules
        assert arena.committed_runs == [(g, 4 * g)]
        assert before - driver_free() == 3 * g == last(captured, "kv_arena.commit")["measured_committed_bytes"]
        view = arena.tensor(g, (3 * g,), torch.uint8)
        view.fill_(9)
        assert int(view[-1]) == 9
        del view
        arena.decommit(2 * g, g)  # the middle handle alone
        assert arena.committed_runs == [(g, 2 * g), (3 * g, 4 * g)]
        assert before - driver_free() == 2 * g
        with pytest.raises(ArenaError, match="whole granules"):
            backend.map(arena.base + 2 * g + 2 * MiB, g)


def test_misuse_is_refused_before_the_driver_sees_it(backend: CudaBackend) -> None:
    g = backend.granularity
    base = backend.reserve(4 * g)
    backend.map(base, 2 * g)
    with pytest.raises(ValueError, match="already mapped"):
        backend.map(base + g, 2 * g)
    with pytest.raises(ValueError, match="not mapped"):
        backend.unmap(base + g, 2 * g)
    with pytest.raises(ArenaError, match="inside a reservation"):
        backend.map(base + 4 * g, g)
    with pytest.raises(ArenaError, match="whole granules"):
        backend.map(base + 2 * g, g // 2)
    with pytest.raises(ValueError, match="still has mapped granules"):
        backend.release(base, 4 * g)
    assert backend.measure(base, 2 * g) is None
    backend.unmap(base, 2 * g)
    backend.release(base, 4 * g)


def test_exportable_handles_when_the_device_supports_them() -> None:
    supported = driver.cuDeviceGetAttribute(
        driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0
    )
    if not supported[1]:
        with pytest.raises(BackendError, match="POSIX_FD"):
            CudaBackend(0, handle_type="POSIX_FD")
        return
    backend = CudaBackend(0, handle_type="POSIX_FD")
    assert backend.handle_type == "POSIX_FD"
    base = backend.reserve(backend.granularity)
    backend.map(base, backend.granularity)
    view = backend.tensor(base, (16,), torch.int32)
    view.fill_(7)
    assert int(view.sum()) == 112
    del view
    backend.unmap(base, backend.granularity)
    backend.release(base, backend.granularity)


def test_works_before_torch_initialises_cuda_and_shares_its_context() -> None:
    """A fresh process: the backend makes the primary context current; torch then uses the same one.

    Fresh also means the view's address was never mapped before, which a reused reservation cannot promise.
    """
    program = """
import torch
from cuda.bindings import driver
from kvlog.memory.cuda_backend import CudaBackend
backend = CudaBackend(0)
assert not torch.cuda.is_initialized()
g = backend.granularity
base = backend.reserve(4 * g)
# A view over address space that was never mapped in this process (torch's CUDA array interface
# importer refuses such pointers), usable once mapped.
view = backend.tensor(base, (g // 4,), torch.float32)
assert view.data_ptr() == base
backend.map(base, 4 * g)
_, ours = driver.cuCtxGetCurrent()
view.fill_(2.0)
assert float(view.sum()) == 2.0 * (g // 4)
_, torchs = driver.cuCtxGetCurrent()
assert int(ours) == int(torchs) != 0, (ours, torchs)
del view
backend.unmap(base, 4 * g)
backend.release(base, 4 * g)
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def assert_event_matches_driver(event: dict[str, Any], arena: VmmArena, driver_delta: int, allocations: int) -> None:
    """Books, event and driver agree; the driver may add page tables, at most a granule per allocation."""
    g = arena.granularity_bytes
    assert event["committed_bytes"] == arena.committed_bytes
    assert event["measurement_source"] == "cuMemGetInfo"
    assert event["measured_committed_bytes"] == driver_delta
    assert arena.committed_bytes <= driver_delta <= arena.committed_bytes + allocations * g


def test_arena_reserving_one_tib_costs_no_device_memory() -> None:
    before = driver_free()
    with validated_events() as captured, VmmArena.cuda(0, reserve_bytes=1 << 40) as arena:
        assert driver_free() == before
        ready = last(captured, "kv_arena.ready")
        assert ready["backend"] == "cuda" and ready["device"] == 0 and ready["handle_type"] == "NONE"
        assert ready["reserved_va_bytes"] == 1 << 40 == arena.reserved_va_bytes
        assert ready["granularity_bytes"] == arena.granularity_bytes
        assert arena.committed_bytes == 0
    assert driver_free() == before


def test_an_arena_that_names_no_device_is_on_the_first_gpu_as_torchs_cuda_is() -> None:
    with validated_events() as captured, VmmArena.cuda(reserve_bytes=GiB) as arena:
        assert last(captured, "kv_arena.ready")["device"] == 0 == arena.backend.device
        arena.commit(0, arena.granularity_bytes)
        view = arena.tensor(0, (16,), torch.uint8)
        view.fill_(3)
        assert view.device == torch.device("cuda", 0) and int(view.sum()) == 48
        del view


def test_arena_commits_of_8_gib_in_steps_match_the_driver_after_every_step() -> None:
    before = driver_free()
    with validated_events() as captured, VmmArena.cuda(0, reserve_bytes=64 * GiB) as arena:
        g = arena.granularity_bytes
        # Unaligned requests round outwards; commits land in separate places of the reservation.
        steps = [(0, 1), (3 * g + 5, 3 * MiB), (GiB, 255 * MiB), (2 * GiB, GiB + 3), (20 * GiB, 2 * GiB)]
        for calls, (offset, nbytes) in enumerate(steps, start=1):
            arena.commit(offset, nbytes)
            assert_event_matches_driver(last(captured, "kv_arena.commit"), arena, before - driver_free(), calls)
        rest = 8 * GiB - arena.committed_bytes
        arena.commit(40 * GiB, rest)
        assert arena.committed_bytes == 8 * GiB
        commit = last(captured, "kv_arena.commit")
        assert commit["nbytes"] == rest and commit["offset_bytes"] == 40 * GiB
        assert_event_matches_driver(commit, arena, before - driver_free(), len(steps) + 1)
        arena.decommit(20 * GiB + 5 * g, 7 * g)
        assert_event_matches_driver(last(captured, "kv_arena.decommit"), arena, before - driver_free(), len(steps) + 1)
    assert driver_free() == before
    assert last(captured, "kv_arena.closed")["released_bytes"] == 8 * GiB - 7 * g


def test_arena_out_of_memory_half_way_keeps_exact_books_and_emits_an_error() -> None:
    with validated_events() as captured, VmmArena.cuda(0, reserve_bytes=32 * GiB) as arena:
        arena.commit(0, GiB)
        measured_before = arena.measure()
        hog = torch.empty(driver_free() - 3 * GiB, dtype=torch.uint8, device="cuda")
        try:
            before = driver_free()
            with pytest.raises(ArenaError, match="cuMemCreate failed: CUDA_ERROR_OUT_OF_MEMORY"):
                arena.commit(4 * GiB, 8 * GiB)
            assert driver_free() == before
            error = last(captured, "kv_arena.error")
            assert error["operation"] == "commit" and error["level"] == "error"
            assert error["offset_bytes"] == 4 * GiB and error["nbytes"] == 8 * GiB
            assert error["committed_bytes"] == GiB == arena.committed_bytes
            assert arena.committed_runs == [(0, GiB)]
            assert arena.measure() == measured_before
        finally:
            del hog
            torch.cuda.empty_cache()
        arena.commit(4 * GiB, 8 * GiB)  # the same range commits once memory is there
        assert arena.committed_bytes == 9 * GiB


def test_sleep_gives_memory_back_and_a_graph_captured_before_replays_after_wake() -> None:
    with validated_events(), VmmArena.cuda(0, reserve_bytes=4 * GiB) as arena:
        g = arena.granularity_bytes
        arena.commit(0, 64 * g)
        source = arena.tensor(0, (8 * g // 4,), torch.float32)
        target = arena.tensor(32 * g, (8 * g // 4,), torch.float32)
        source.fill_(1.0)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            target.copy_(source * 3)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            target.copy_(source * 3)
        torch.cuda.synchronize()
        free_awake = driver_free()
        slept = arena.sleep()
        assert slept.bookkept_bytes == 64 * g == slept.measured_bytes
        assert driver_free() - free_awake == 64 * g
        woke = arena.wake()
        assert woke.bookkept_bytes == 64 * g == woke.measured_bytes
        assert driver_free() == free_awake
        source.fill_(2.0)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(target, torch.full_like(target, 6.0))
        del graph, source, target


def test_views_over_reserved_but_unbacked_memory_become_usable_once_committed() -> None:
    """What a post-capture pool does: views over the upper bound first, physical memory later."""
    with validated_events(), VmmArena.cuda(0, reserve_bytes=GiB) as arena:
        g = arena.granularity_bytes
        arena.commit(0, g)
        later = arena.tensor(8 * g, (4 * g,), torch.uint8, require_committed=False)
        straddling = arena.tensor(0, (4 * g,), torch.uint8, require_committed=False)
        assert later.data_ptr() == arena.base + 8 * g and straddling.data_ptr() == arena.base
        arena.commit(0, 12 * g)
        later.fill_(5)
        straddling.copy_(later)
        torch.cuda.synchronize()
        assert int(straddling.sum()) == 5 * 4 * g
        del later, straddling


SHAPE = KVShape(layers=4, heads=8, head_dim=128, dtype=torch.bfloat16, page_size=16, v_head_dim=64)


def assert_pool_matches_driver(pool: MHAKVPool | MLAKVPool, event: dict[str, Any], driver_delta: int) -> None:
    """One arena per pool; each buffer is its own commit range, so page tables may add a granule each."""
    g = pool.arena.granularity_bytes
    assert event["committed_bytes"] == pool.committed_bytes == pool.arena.committed_bytes
    assert pool.committed_bytes <= driver_delta <= pool.committed_bytes + len(pool.buffers) * g


def store_and_load(keys: list[torch.Tensor], values: list[torch.Tensor], tokens: int) -> None:
    """Scatter random K/V into random slots as a server stores a step, gather them back, compare."""
    generator = torch.Generator(device="cuda").manual_seed(3)
    slots = torch.randperm(tokens, device="cuda", generator=generator)[:4096]
    for k_layer, v_layer in zip(keys, values, strict=True):
        new_k = torch.randn(4096, *k_layer.shape[1:], device="cuda", generator=generator).to(k_layer.dtype)
        new_v = torch.randn(4096, *v_layer.shape[1:], device="cuda", generator=generator).to(v_layer.dtype)
        k_layer[slots] = new_k
        v_layer.index_copy_(0, slots, new_v)
        assert torch.equal(k_layer[slots], new_k)
        assert torch.equal(v_layer.index_select(0, slots).cpu(), new_v.cpu())


def test_pool_kv_tensors_are_written_and_read_back_by_cuda_kernels() -> None:
    tokens = 64 * 1024
    # The same kernels on ordinary tensors first: lazy module loading spends device memory (2 MiB
    # seen) at a kernel's first launch, which must not land inside the measured window.
    scratch_k = [torch.zeros(tokens, 8, 128, dtype=torch.bfloat16, device="cuda")]
    scratch_v = [torch.zeros(tokens, 8, 64, dtype=torch.bfloat16, device="cuda")]
    store_and_load(scratch_k, scratch_v, tokens)
    del scratch_k, scratch_v
    before = settled_free()
    with validated_events() as captured, MHAKVPool.allocate(SHAPE, num_tokens=tokens, backend="cuda") as pool:
        assert_pool_matches_driver(pool, last(captured, "kv_pool.allocation"), before - driver_free())
        arena = pool.arena
        assert all(arena.base <= b.data_ptr() < arena.base + arena.reserved_va_bytes for b in pool.buffers)
        store_and_load(pool.k_buffer, pool.v_buffer, tokens)
    assert settled_free() == before  # the test's own tensors came from torch's caching allocator


def test_mla_pool_buffers_are_written_and_read_back_by_cuda_kernels() -> None:
    shape = KVShape(layers=2, heads=1, head_dim=576, dtype=torch.bfloat16, page_size=1)
    before = settled_free()
    with validated_events() as captured, MLAKVPool.allocate(shape, num_tokens=100_000, backend="cuda") as pool:
        assert_pool_matches_driver(pool, last(captured, "kv_pool.allocation"), before - driver_free())
        for layer, buffer in enumerate(pool.kv_buffer):
            buffer[-100:].fill_(layer + 0.5)
            assert float(buffer[-100:].float().mean()) == layer + 0.5
        del buffer
    assert settled_free() == before


def test_a_cuda_graph_captured_over_a_planned_pool_replays_after_finalize() -> None:
    with validated_events() as captured, MHAKVPool.plan(SHAPE, 1 << 20, backend="cuda") as pool:
        planned = last(captured, "kv_pool.allocation")
        assert planned["allocation_state"] == "va_upper_bound"
        assert planned["committed_bytes"] == pool.committed_bytes == pool.cost(0)
        addresses = [buffer.data_ptr() for buffer in pool.buffers]
        keys, values = pool.k_buffer[1], pool.v_buffer[1]  # views over the whole upper bound
        slots = torch.arange(16, device="cuda")  # the graph's static input: the backed first page
        new_k = torch.ones(16, 8, 128, dtype=torch.bfloat16, device="cuda")
        new_v = torch.ones(16, 8, 64, dtype=torch.bfloat16, device="cuda")
        doubled = torch.empty_like(new_k)

        def step(keys: torch.Tensor, values: torch.Tensor) -> None:
            keys.index_copy_(0, slots, new_k)
            values.index_copy_(0, slots, new_v)
            doubled.copy_(keys.index_select(0, slots) * 2)

        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            step(keys, values)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step(keys, values)
        torch.cuda.synchronize()

        free_before = driver_free()
        tokens = pool.finalize(budget_bytes=2 * GiB)
        assert [buffer.data_ptr() for buffer in pool.buffers] == addresses
        assert pool.cost(tokens) <= 2 * GiB < pool.cost(tokens + 16)
        grown = pool.committed_bytes - pool.cost(0)
        assert grown <= free_before - driver_free() <= grown + len(pool.buffers) * pool.arena.granularity_bytes
        allocated = last(captured, "kv_pool.allocation")
        assert allocated["allocation_state"] == "allocated" and allocated["num_tokens"] == tokens
        assert last(captured, "kv_pool.post_capture_sized")["max_total_num_tokens"] == tokens

        # Point the captured graph at the last slots, which only finalize backed, and replay it.
        slots.copy_(torch.arange(tokens - 16, tokens, device="cuda"))
        new_k.fill_(3.0)
        new_v.fill_(4.0)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(pool.k_buffer[1][tokens - 16 : tokens], torch.full_like(new_k, 3.0))
        assert torch.equal(pool.v_buffer[1][tokens - 16 : tokens], torch.full_like(new_v, 4.0))
        assert torch.equal(doubled, torch.full_like(new_k, 6.0))
        assert torch.equal(pool.k_buffer[1][:16], torch.ones_like(new_k))  # what the warm-up wrote is kept
        del graph, keys, values


def test_swa_finalize_past_free_memory_fails_for_real_and_leaves_both_arenas_planned() -> None:
    swa_shape = KVShape(layers=2, heads=8, head_dim=128, dtype=torch.bfloat16, page_size=16)
    with (
        validated_events() as captured,
        SWAKVPool.plan(
            SHAPE, swa_shape, full_upper_bound_tokens=1 << 24, swa_upper_bound_tokens=1 << 21, backend="cuda"
        ) as pool,
    ):
        planned = pool.committed_bytes
        before = driver_free()
        budget = before + 8 * GiB  # more than the GPU has: a cuMemCreate fails half-way
        with pytest.raises(ArenaError, match="CUDA_ERROR_OUT_OF_MEMORY"):
            pool.finalize(budget_bytes=budget)
        assert pool.committed_bytes == planned
        assert driver_free() == before
        error = last(captured, "kv_arena.error")  # the full sub-pool ran out; the window one was shrunk back
        assert error["arena_id"] == pool.full.arena.arena_id
        assert error["committed_bytes"] == pool.full.committed_bytes == pool.full.cost(0)
        assert pool.swa.committed_bytes == pool.swa.cost(0)
        tokens = pool.finalize(budget_bytes=4 * GiB)  # still planned: sizing again works
        summary = last(captured, "kv_pool.swa_summary")
        assert summary["allocation_state"] == "allocated" and summary["full_tokens"] == tokens
        grown = pool.committed_bytes - planned
        buffers = len(pool.full.buffers) + len(pool.swa.buffers)
        assert grown <= before - driver_free() <= grown + buffers * pool.full.arena.granularity_bytes
        assert summary["committed_bytes"] == pool.committed_bytes
