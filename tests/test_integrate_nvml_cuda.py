"""``kvlog integrate --nvml`` on a real GPU: the driver tells a reservation from memory, live.

A process reserves address space for a KV pool through the memory runtime (``MHAKVPool.plan``:
``cuMemAddressReserve``, and the padding page committed) and logs sglang's pre-#33598 wording, which
says ``KV Cache is allocated`` of a reservation; the handler's NVML sample says ``va_upper_bound``. Then
the pool is committed (``finalize``) and logged again: the measured rise is the commit, within one
granule. Runs on the device machine (``KVLOG_REQUIRE_CUDA=1 pytest -m cuda``); skips without a GPU,
cuda-bindings or nvidia-ml-py. The figures are printed (``-s``) for BENCHMARKS.md.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from follow_helpers import wait_for
from memory_helpers import gpu_or_skip
from test_integrate_handler import attached, decoded

pytestmark = pytest.mark.cuda

torch, driver = gpu_or_skip()
try:
    import pynvml  # noqa: F401
except ImportError as missing:
    if os.environ.get("KVLOG_REQUIRE_CUDA") == "1":
        pytest.fail(f"KVLOG_REQUIRE_CUDA=1 but nvidia-ml-py is missing: {missing}", pytrace=False)
    pytest.skip(f"nvidia-ml-py missing: {missing}", allow_module_level=True)

from kvlog.memory import KVShape, MHAKVPool  # noqa: E402

GiB = 1 << 30
#: 2 layers of K and V, 4 KiB a token each: 16 KiB a token
SHAPE = KVShape(layers=2, heads=8, head_dim=128, dtype=torch.bfloat16, page_size=1)
#: address space for 8 GiB of KV
UPPER_TOKENS = 1 << 20
#: what the commit is given: some 4 GiB
BUDGET = 4 << 30


def pre_fix_line(pool: MHAKVPool) -> str:
    """sglang's wording between post-capture sizing and #33598: ``is allocated`` whatever is held (GiB, as "GB")."""
    k, v = pool.shaped_bytes("k") / GiB, pool.shaped_bytes("v") / GiB
    return (
        f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {pool.num_tokens}, "
        f"K size: {k:.2f} GB, V size: {v:.2f} GB"
    )


def test_a_reservation_logged_as_allocated_is_a_va_bound_by_measurement_and_its_commit_is_measured(
    tmp_path: Path,
) -> None:
    torch.zeros(1, device="cuda")  # the CUDA context: NVML lists the process from here on
    torch.cuda.synchronize()
    logger, handler, events = attached(tmp_path, nvml=True, hold_s=0.5)
    pool = None
    try:
        logger.info(
            "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=70.00 GB, mem usage=0.01 GB."
        )
        wait_for(lambda: handler.samples >= 1, what="the first sample")
        pool = MHAKVPool.plan(SHAPE, UPPER_TOKENS, backend="cuda")
        planned = pool.committed_bytes
        logger.info(pre_fix_line(pool))
        wait_for(lambda: handler.samples >= 2, what="the reservation's sample")
        pool.finalize(BUDGET)
        committed = pool.committed_bytes
        logger.info(pre_fix_line(pool))
        wait_for(lambda: handler.samples >= 3, what="the commit's sample")
    finally:
        handler.close()
        logger.removeHandler(handler)
        if pool is not None:
            pool.close()
    written = decoded(events)
    pools = [e for e in written if e["event"] == "kv_pool.allocation"]
    measured: dict[int, dict[str, Any]] = {
        e["measured_line"]: e for e in written if e["event"] == "device_memory.measured"
    }
    assert len(pools) == 2, written
    reserved, grown = pools
    granule = pool.arena.granularity_bytes
    print(
        f"\ndevice: {torch.cuda.get_device_name(0)}; granule {granule} B; planned {planned} B committed, "
        f"{pool.arena.reserved_va_bytes} B reserved; finalized {committed} B"
    )
    for event in pools:
        figures = measured[event["migrated"]["line"]]
        print(
            f"line {event['migrated']['line']}: stated {event['k_bytes'] + event['v_bytes']} B "
            f"{event['allocation_state']} ({event['migrated']['inferred']['allocation_state']['rule']}); "
            f"process used {figures['process_used_bytes']} B (delta {figures['process_used_delta_bytes']}), "
            f"device used {figures['device_used_bytes']} B (delta {figures['device_used_delta_bytes']}), "
            f"lag {figures['lag_us']} us; {event['migrated']['inferred']['allocation_state']['evidence']}"
        )
    assert reserved["allocation_state"] == "va_upper_bound"
    assert reserved["migrated"]["inferred"]["allocation_state"]["rule"] == "measured"
    commit = measured[grown["migrated"]["line"]]
    rise = commit["process_used_delta_bytes"]
    if rise is None:  # NVML does not list this process (a container): the device's figure, with nothing else on it
        rise = commit["device_used_delta_bytes"]
    assert abs(rise - (committed - planned)) <= granule
    assert grown["allocation_state"] == "allocated"
    assert grown["migrated"]["inferred"]["allocation_state"]["rule"] == "measured"  # rose by the stated size
