"""Every field of every event a KV pool emits, and the sizing arithmetic behind them, on the host backend.

Shapes with a page size of one token and rows that are not whole pages, so that a figure rounded the
wrong way, a padding row forgotten or a buffer laid out at the wrong offset changes a number.
"""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
import torch
from memory_helpers import FaultyBackend, kernel_rss, own_fields, validated_events

from kvlog.memory import HostKVPool, KVShape, MHAKVPool, MLAKVPool, PoolSizingError, PoolStateError, VmmArena, pinning
from kvlog.memory.host_backend import PAGE_SIZE
from kvlog.memory.limits import ADDRESS_SPACE_LIMIT

P = PAGE_SIZE
# K rows of 192 bytes, V rows of 64: 101 rows are 19392 and 6464 bytes, 5 and 2 pages.
SHAPE = KVShape(layers=2, heads=2, head_dim=48, dtype=torch.float16, page_size=1, v_head_dim=16)
K_ROW, V_ROW = 192, 64
# One token of K and V is 1000 bytes: a host size in bytes is its token count times 1000.
THOUSAND = KVShape(layers=1, heads=1, head_dim=500, dtype=torch.uint8, page_size=1)


def rss(arena: VmmArena) -> int:
    return kernel_rss(arena.base, arena.base + arena.reserved_va_bytes)


def pages(nbytes: int) -> int:
    return -(-nbytes // P) * P


def allocation(pool: MHAKVPool, state: str, tokens: int, label: str | None = None) -> dict[str, object]:
    """The ``kv_pool.allocation`` of ``pool`` (of ``SHAPE``) with ``tokens`` usable slots and its padding row."""
    return {
        "event": "kv_pool.allocation",
        "schema_version": 2,
        "level": "info",
        "pool": "MHAKVPool",
        "label": label,
        "layout": "mha",
        "allocation_state": state,
        "dtype": "torch.float16",
        "num_tokens": tokens,
        "k_bytes": 2 * (tokens + 1) * K_ROW,
        "v_bytes": 2 * (tokens + 1) * V_ROW,
        "committed_bytes": rss(pool.arena),
        "arena_ids": [pool.arena.arena_id],
    }


def test_an_eager_pool_lays_its_buffers_out_granule_by_granule_and_says_what_it_holds() -> None:
    with validated_events() as captured, MHAKVPool.allocate(SHAPE, num_tokens=100, label="Full") as pool:
        arena = pool.arena
        extents = [5 * P, 5 * P, 2 * P, 2 * P]  # 101 rows of K, K, V, V
        assert [buffer.data_ptr() - arena.base for buffer in pool.buffers] == [0, 5 * P, 10 * P, 12 * P]
        assert [tuple(k.shape) for k in pool.k_buffer] == [(101, 2, 48)] * 2
        assert [tuple(v.shape) for v in pool.v_buffer] == [(101, 2, 16)] * 2
        assert arena.reserved_va_bytes == sum(extents) == pool.cost(100) == pool.committed_bytes == rss(arena)
        assert (pool.shaped_bytes("k"), pool.shaped_bytes("v", 0)) == (2 * 101 * K_ROW, 2 * V_ROW)
        assert own_fields(captured[-2]) | {"duration_us": 0} == {
            "event": "kv_arena.commit",
            "schema_version": 2,
            "level": "info",
            "arena_id": arena.arena_id,
            "range_count": 4,
            "offset_bytes": 0,
            "nbytes": 14 * P,
            "requested_nbytes": 2 * 101 * (K_ROW + V_ROW),
            "committed_bytes": 14 * P,
            "measured_committed_bytes": 14 * P,
            "measurement_source": "smaps_rss",
            "duration_us": 0,
        }
        assert own_fields(captured[-1]) == allocation(pool, "allocated", 100, "Full")
        assert pool.state == "allocated" and pool.num_tokens == pool.max_tokens == 100


def test_an_mla_pool_from_a_budget_takes_the_most_tokens_whose_whole_granules_fit() -> None:
    shape = KVShape(layers=2, heads=1, head_dim=576, dtype=torch.bfloat16, page_size=1)  # 1152-byte rows
    with validated_events() as captured, MLAKVPool.allocate(shape, budget_bytes=16 * P, label="SWA") as pool:
        # 28 rows are 32256 bytes, 8 pages per buffer; 29 rows would take 9: 27 tokens and the padding row.
        assert pool.num_tokens == 27 and [tuple(kv.shape) for kv in pool.kv_buffer] == [(28, 1, 576)] * 2
        assert own_fields(captured[-1]) == {
            "event": "kv_pool.allocation",
            "schema_version": 2,
            "level": "info",
            "pool": "MLAKVPool",
            "label": "SWA",
            "layout": "mla",
            "allocation_state": "allocated",
            "dtype": "torch.bfloat16",
            "num_tokens": 27,
            "kv_bytes": 2 * 28 * 1152,
            "committed_bytes": 16 * P,
            "arena_ids": [pool.arena.arena_id],
        }
        assert rss(pool.arena) == 16 * P
    with pytest.raises(PoolSizingError, match=rf"a budget of {2 * P - 1} bytes does not cover the first page"):
        MLAKVPool.allocate(shape, budget_bytes=2 * P - 1)


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({}, ValueError, "give exactly one of num_tokens and budget_bytes"),
        ({"num_tokens": 16, "budget_bytes": 1 << 30}, ValueError, "give exactly one of num_tokens and budget_bytes"),
        ({"num_tokens": 17}, PoolSizingError, "17 tokens is not a non-negative multiple of the page size"),
        ({"num_tokens": -16}, PoolSizingError, "num_tokens -16 must not be negative"),
        ({"budget_bytes": -1}, PoolSizingError, "budget_bytes -1 must not be negative"),
    ],
)
def test_an_eager_pool_refuses_sizes_it_cannot_have(
    arguments: dict[str, int], error: type[Exception], message: str
) -> None:
    shape = KVShape(layers=1, heads=1, head_dim=64, dtype=torch.float16, page_size=16)
    with validated_events() as captured, pytest.raises(error, match=f"^{re.escape(message)}$"):
        MHAKVPool.allocate(shape, **arguments)  # type: ignore[arg-type]
    assert "kv_pool.allocation" not in [event["event"] for event in captured]


@pytest.mark.parametrize(
    ("max_tokens", "message"),
    [(-1, "max_tokens -1 must not be negative"), (16.0, "max_tokens must be an integer, not float 16.0")],
)
def test_a_pool_built_on_its_own_backend_refuses_a_token_count_that_is_none(max_tokens: Any, message: str) -> None:
    with validated_events() as captured, pytest.raises(PoolSizingError, match=f"^{re.escape(message)}$"):
        MHAKVPool(SHAPE, max_tokens, FaultyBackend())
    assert captured == [], "refused before any memory was reserved"


def test_the_post_capture_lifecycle_says_the_upper_bound_then_the_budget_and_what_it_bought() -> None:
    with validated_events() as captured, MHAKVPool.plan(SHAPE, upper_bound_tokens=1000) as pool:
        assert pool.arena.reserved_va_bytes == 2 * pages(1001 * K_ROW) + 2 * pages(1001 * V_ROW)
        assert own_fields(captured[-1]) == allocation(pool, "va_upper_bound", 1000)
        assert pool.committed_bytes == 4 * P == pool.cost(0)  # the padding row of each buffer
        tokens = pool.finalize(budget_bytes=40 * P, free_bytes=123)
        assert pool.cost(tokens) <= 40 * P < pool.cost(tokens + 1)
        sized, allocated = (own_fields(event) for event in captured[-2:])
        assert sized == {
            "event": "kv_pool.post_capture_sized",
            "schema_version": 2,
            "level": "info",
            "pool": "MHAKVPool",
            "label": None,
            "dtype": "torch.float16",
            "max_total_num_tokens": tokens,
            "free_bytes": 123,
            "budget_bytes": 40 * P,
            "committed_bytes": pool.cost(tokens),
        }
        assert allocated == allocation(pool, "allocated", tokens)
        assert [buffer.shape[0] for buffer in pool.buffers] == [tokens + 1] * 4
        with pytest.raises(
            PoolStateError, match=rf"^MHAKVPool is already sized \({tokens} tokens\); finalize runs once$"
        ):
            pool.finalize(budget_bytes=40 * P)


def test_without_a_budget_finalize_takes_free_memory_less_headroom_plus_what_the_pool_holds() -> None:
    with validated_events() as captured, MHAKVPool.plan(SHAPE, upper_bound_tokens=1000) as pool:
        for wrong, message in [
            ({"headroom_bytes": -1}, "headroom_bytes -1 must not be negative"),
            ({"free_bytes": -1}, "free_bytes -1 must not be negative"),
            ({"budget_bytes": -1, "free_bytes": 0}, "budget_bytes -1 must not be negative"),
        ]:
            with pytest.raises(PoolSizingError, match=f"^{re.escape(message)}$"):
                pool.finalize(**wrong)  # type: ignore[arg-type]
        assert pool.state == "va_upper_bound"
        tokens = pool.finalize(free_bytes=30 * P, headroom_bytes=3 * P + 5)
        assert captured[-2]["budget_bytes"] == 30 * P - (3 * P + 5) + 4 * P
        assert pool.cost(tokens) <= 31 * P - 5 < pool.cost(tokens + 1)


def test_the_upper_bound_caps_finalize_and_is_rounded_down_to_whole_pages() -> None:
    shape = KVShape(layers=1, heads=1, head_dim=64, dtype=torch.float16, page_size=16)
    with validated_events() as captured, MHAKVPool.plan(shape, upper_bound_tokens=16 * 5 + 15) as pool:
        assert pool.max_tokens == 80 and captured[-1]["num_tokens"] == 80
        assert pool.finalize(budget_bytes=1 << 30, free_bytes=0) == 80
        assert pool.size_for(1 << 30) == 80


def test_reverting_to_the_plan_gives_back_each_buffers_growth_in_one_event() -> None:
    with validated_events() as captured, MHAKVPool.plan(SHAPE, upper_bound_tokens=1000) as pool:
        addresses = [buffer.data_ptr() for buffer in pool.buffers]
        pool.finalize(budget_bytes=40 * P, free_bytes=0)
        pool.revert_to_plan()
        grown = 2 * (pages(1001 * K_ROW) - P) + 2 * (pages(1001 * V_ROW) - P)  # every region past its first page
        assert own_fields(captured[-1]) == {
            "event": "kv_arena.decommit",
            "schema_version": 2,
            "level": "info",
            "arena_id": pool.arena.arena_id,
            "range_count": 4,
            "offset_bytes": P,
            "nbytes": grown,
            "requested_nbytes": grown,
            "committed_bytes": 4 * P,
            "measured_committed_bytes": 4 * P,
            "measurement_source": "smaps_rss",
        }
        assert (pool.state, pool.num_tokens, pool.committed_bytes) == ("va_upper_bound", 1000, pool.cost(0))
        assert [buffer.shape[0] for buffer in pool.buffers] == [1001] * 4
        assert [buffer.data_ptr() for buffer in pool.buffers] == addresses
        tokens = pool.finalize(budget_bytes=40 * P, free_bytes=0)  # sized again, as if for the first time
        assert pool.committed_bytes == pool.cost(tokens) == rss(pool.arena)


def test_reverting_a_pool_that_never_outgrew_its_first_page_emits_nothing() -> None:
    with validated_events() as captured, MHAKVPool.plan(SHAPE, upper_bound_tokens=3) as pool:
        pool.finalize(budget_bytes=1 << 20, free_bytes=0)
        before = len(captured)
        pool.revert_to_plan()
        assert len(captured) == before
        assert (pool.state, pool.num_tokens, pool.committed_bytes) == ("va_upper_bound", 3, 4 * P)


def sleep_or_wake(pool: Any, name: str, bookkept: int, measured: int | None, label: str | None) -> dict[str, Any]:
    what = "freed" if name == "sleep" else "restored"
    discrepancy = None if measured is None else measured - bookkept
    return {
        "event": f"kv_pool.{name}",
        "schema_version": 1,
        "level": "warning" if discrepancy else "info",
        "pool": type(pool).__name__,
        "label": label,
        "arena_ids": [pool.arena.arena_id],
        f"{what}_bytes": bookkept,
        f"measured_{what}_bytes": measured,
        "measurement_source": None if measured is None else "smaps_rss",
        "discrepancy_bytes": discrepancy,
    }


def test_sleep_and_wake_say_what_the_books_and_the_kernel_saw_change() -> None:
    with validated_events() as captured, MHAKVPool.allocate(SHAPE, num_tokens=100, label="SWA") as pool:
        pool.sleep()
        assert own_fields(captured[-1]) == sleep_or_wake(pool, "sleep", 14 * P, 14 * P, "SWA")
        assert captured[-1]["duration_us"] == captured[-2]["duration_us"]  # the arena's own decommit
        pool.wake()
        assert own_fields(captured[-1]) == sleep_or_wake(pool, "wake", 14 * P, 14 * P, "SWA")
        assert captured[-1]["duration_us"] == captured[-2]["duration_us"]
        assert rss(pool.arena) == 14 * P


def test_a_wake_after_a_sleep_that_could_not_give_everything_back_warns_of_the_difference() -> None:
    backend = FaultyBackend()
    with validated_events() as captured, MHAKVPool(SHAPE, 100, backend) as pool:
        pool.commit_tokens(100)
        base = pool.arena.base  # the buffers are one run: the first V buffer's memory stays
        backend.fail("unmap", base, still_held=((base + 10 * P, 2 * P),))
        with pytest.raises(Exception, match="sleep refused"):
            pool.sleep()
        backend.faults.clear()
        pool.wake()
        assert own_fields(captured[-1]) == sleep_or_wake(pool, "wake", 14 * P, 12 * P, None)


def test_without_a_measurement_sleep_and_wake_say_nothing_of_a_discrepancy() -> None:
    backend = FaultyBackend()
    backend.unmeasurable = True
    with validated_events() as captured, MHAKVPool(SHAPE, 100, backend) as pool:
        pool.commit_tokens(100)
        pool.sleep()
        assert own_fields(captured[-1]) == sleep_or_wake(pool, "sleep", 14 * P, None, None)
        pool.wake()
        assert own_fields(captured[-1]) == sleep_or_wake(pool, "wake", 14 * P, None, None)


def test_a_closed_pool_refuses_every_lifecycle_step() -> None:
    with validated_events():
        pool = MHAKVPool.plan(SHAPE, upper_bound_tokens=100)
        pool.close()
        assert pool.buffers == []
        for step in (pool.sleep, pool.wake, lambda: pool.finalize(budget_bytes=1 << 20, free_bytes=0)):
            with pytest.raises(PoolStateError, match=r"^MHAKVPool is closed$"):
                step()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"layers": 4097}, "KVShape.layers 4097 is larger than 4096, the most allowed"),
        ({"heads": 0}, "KVShape.heads 0 must be at least 1"),
        ({"head_dim": 0}, "KVShape.head_dim 0 must be at least 1"),
        ({"page_size": 0}, "KVShape.page_size 0 must be at least 1"),
        ({"v_head_dim": 0}, "KVShape.v_head_dim 0 must be at least 1"),
        ({"dtype": "uint8"}, "KVShape.dtype must be a torch.dtype, not 'uint8'"),
        ({"page_size": ADDRESS_SPACE_LIMIT // 2 + 1}, "more than this platform can address"),
        ({"v_head_dim": 3, "page_size": ADDRESS_SPACE_LIMIT // 4 + 1}, "more than this platform can address"),
        ({"dtype": torch.float16, "page_size": ADDRESS_SPACE_LIMIT // 4 + 1}, "more than this platform can address"),
    ],
)
def test_a_shape_no_pool_can_have_is_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        KVShape(**{"layers": 1, "heads": 1, "head_dim": 1, "dtype": torch.uint8, **fields})


def test_the_largest_shapes_a_pool_can_have_are_accepted() -> None:
    """One page of every layer exactly as large as the address space, and the most layers, are still shapes."""
    KVShape(layers=4096, heads=1, head_dim=1, dtype=torch.uint8)
    KVShape(layers=1, heads=1, head_dim=1, dtype=torch.uint8, page_size=ADDRESS_SPACE_LIMIT // 2)
    KVShape(layers=1, heads=1, head_dim=1, v_head_dim=3, dtype=torch.uint8, page_size=ADDRESS_SPACE_LIMIT // 4)
    KVShape(layers=1, heads=1, head_dim=1, dtype=torch.float16, page_size=ADDRESS_SPACE_LIMIT // 4)


def test_a_host_pool_says_its_label_tokens_and_bytes_and_has_no_padding_row() -> None:
    shape = KVShape(layers=1, heads=1, head_dim=64, dtype=torch.float16, page_size=16)
    with validated_events() as captured, HostKVPool(shape, num_tokens=40, label="swa", pin=False) as pool:
        assert pool.num_tokens == 32 and [buffer.shape[0] for buffer in pool.buffers] == [32, 32]
        assert not pool.pinned
        assert own_fields(captured[-1]) == {
            "event": "kv_host_pool.allocation",
            "schema_version": 1,
            "level": "info",
            "label": "swa",
            "num_tokens": 32,
            "host_bytes": 2 * P,
        }
        assert rss(pool.arena) == 2 * P
        pool.sleep()
        assert own_fields(captured[-1]) == sleep_or_wake(pool, "sleep", 2 * P, 2 * P, None)
        pool.wake()
        assert own_fields(captured[-1]) == sleep_or_wake(pool, "wake", 2 * P, 2 * P, None)


def test_a_host_size_in_decimal_gb_is_rounded_to_the_byte_and_a_ratio_truncated_to_the_token() -> None:
    with validated_events():
        # 1.9999999999e-6 GB is 1999.9999999 bytes as a float: 2000 bytes, two 1000-byte tokens.
        with HostKVPool(THOUSAND, size_gb=1.9999999999e-6, pin=False) as by_size:
            assert by_size.num_tokens == 2
        with (
            MHAKVPool.allocate(THOUSAND, num_tokens=1000) as device,
            HostKVPool(THOUSAND, device_pool=device, ratio=1.0007, pin=False) as by_ratio,
        ):
            assert by_ratio.num_tokens == 1000  # 1000.7 slots: the 1000 that exist


@pytest.mark.parametrize(
    "arguments",
    [{}, {"num_tokens": 16, "size_gb": 1.0}, {"num_tokens": 16, "ratio": 2.0}, {"ratio": 2.0}, {"device_pool": "any"}],
)
def test_a_host_pool_needs_exactly_one_way_of_sizing_it(arguments: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"^give exactly one of num_tokens, size_gb, or device_pool with ratio$"):
        HostKVPool(THOUSAND, **arguments)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"size_gb": 0}, "size_gb must be a finite number above 0, not 0"),
        ({"size_gb": -1.5}, "size_gb must be a finite number above 0, not -1.5"),
        ({"size_gb": math.nan}, "size_gb must be a finite number above 0, not nan"),
        ({"size_gb": math.inf}, "size_gb must be a finite number above 0, not inf"),
        ({"size_gb": True}, "size_gb must be a finite number above 0, not True"),
        ({"size_gb": "1"}, "size_gb must be a finite number above 0, not '1'"),
        ({"size_gb": 1e300}, "size_gb 1e+300 is beyond any size a host has"),
        ({"num_tokens": 15}, "a host pool of 15 tokens holds no page of 16 tokens"),
        ({"num_tokens": 0}, "a host pool of 0 tokens holds no page of 16 tokens"),
        ({"num_tokens": -1}, "num_tokens -1 must not be negative"),
    ],
)
def test_a_host_pool_size_that_is_no_size_is_refused(arguments: dict[str, Any], message: str) -> None:
    shape = KVShape(layers=1, heads=1, head_dim=64, dtype=torch.float16, page_size=16)
    with validated_events() as captured, pytest.raises(PoolSizingError, match=f"^{re.escape(message)}$"):
        HostKVPool(shape, pin=False, **arguments)
    assert captured == [], "refused before any memory was reserved"


def test_a_host_pool_ratio_of_zero_is_no_size() -> None:
    with validated_events(), MHAKVPool.allocate(THOUSAND, num_tokens=10) as device:
        with pytest.raises(PoolSizingError, match=r"^ratio must be a finite number above 0, not 0$"):
            HostKVPool(THOUSAND, device_pool=device, ratio=0)
        with pytest.raises(PoolSizingError, match=r"^ratio 1e\+308 is beyond any size a host has$"):
            HostKVPool(THOUSAND, device_pool=device, ratio=1e308)


class RecordingCudart:
    """The CUDA runtime's host registration, as torch binds it, recording each call and what was resident then."""

    class cudaError:
        success = 0

    def __init__(self) -> None:
        self.registered: dict[int, int] = {}
        self.calls: list[tuple[str, int]] = []

    def cudaHostRegister(self, address: int, nbytes: int, flags: int) -> int:
        assert flags == 0 and address not in self.registered
        assert kernel_rss(address, address + nbytes) == nbytes, "registering memory that is not held"
        self.registered[address] = nbytes
        self.calls.append(("register", nbytes))
        return 0

    def cudaHostUnregister(self, address: int) -> int:
        nbytes = self.registered.pop(address)
        assert kernel_rss(address, address + nbytes) == nbytes, "memory given back while still registered"
        self.calls.append(("unregister", nbytes))
        return 0


def test_a_pinned_host_pool_unpins_before_giving_memory_back_and_pins_again_after_backing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cudart = RecordingCudart()
    monkeypatch.setattr(pinning, "_runtime", lambda: cudart)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    shape = KVShape(layers=1, heads=1, head_dim=64, dtype=torch.float16, page_size=16)
    with validated_events():
        pool = HostKVPool(shape, num_tokens=32, pin=True)
        assert pool.pinned and cudart.registered == {pool.arena.base: 2 * P}
        pool.sleep()
        assert not pool.pinned and cudart.registered == {}
        pool.wake()
        assert pool.pinned and cudart.registered == {pool.arena.base: 2 * P}
        pool.close()
    assert not pool.pinned and cudart.registered == {}
    assert cudart.calls == [("register", 2 * P), ("unregister", 2 * P)] * 2
