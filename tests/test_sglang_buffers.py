"""sglang's auxiliary device buffers of memory.buffer_allocated v2: each wording's figures, and its ledger consumer.

The sample lines of tests/test_formats.py are written from the harvested format strings with made-up values;
these are lines as a server prints them (the DeviceCache one from sglang issue #26860), each read into its kind
with the bytes the source computes (``/ (1024 * 1024)`` is MiB, ``// (1024 * 1024)`` too), and held to the
consumer ``kvlog ledger`` counts it under: a buffer allocated within a CUDA-graph capture is the capture's.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from kvlog import commands
from kvlog.migration import load_chain
from kvlog.migration.engine import MigrateOptions, Migrator
from kvlog.schema.readings import DEVICE_CONSUMERS

MIGRATOR = Migrator(load_chain(), MigrateOptions())
MIB = 1 << 20
GIB = 1 << 30


def _event(line: str) -> dict[str, Any]:
    out, dead = io.BytesIO(), []
    MIGRATOR.migrate("sample.log", io.BytesIO((line + "\n").encode()), out, dead.append)
    events = [json.loads(raw) for raw in out.getvalue().splitlines() if raw.startswith(b'{"event"')]
    assert dead == [], dead
    [event] = events
    return event


def _consumers(event: dict[str, Any]) -> list[str]:
    return [reading.consumer for reading in DEVICE_CONSUMERS if reading.states(event)]


@pytest.mark.parametrize(
    ("line", "kind", "name", "device", "size_bytes", "spread", "consumers"),
    [
        (
            "[2026-06-01 10:00:01 TP0] DeviceCache[routed_experts] allocated: shape=(2048, 48, 8), size=3.00 MB",
            "state_capture",
            "routed_experts",
            None,
            3 * MIB,
            5243,
            ["aux_buffers"],
        ),
        (
            "[2026-01-20 10:00:01 TP3] Routing experts device buffer allocated. #shape: (8192, 61, 8), size: 15.25 MB",
            "state_capture",
            None,
            None,
            round(15.25 * MIB),
            5243,
            ["aux_buffers"],
        ),
        (
            "[2026-03-01 10:00:01 TP0] Pre-allocating symmetric memory pool with 4 GiB",
            "symmetric_memory",
            None,
            None,
            4 * GIB,
            GIB // 2,
            ["aux_buffers"],
        ),
        (
            "[2026-09-01 10:00:01 TP1] EmbeddingPool allocated: gpu=1, size=2048MB, base=0x7f2a40000000, "
            "rdma_registered=True",
            "embedding_pool",
            None,
            "1",
            2048 * MIB,
            MIB // 2,
            ["aux_buffers"],
        ),
        (
            "[2026-05-01 10:00:01 TP0] MooncakeEmbeddingPool registered: gpu=0, size=1024MB, base=0x7f2a40000000",
            "embedding_pool",
            None,
            "0",
            1024 * MIB,
            MIB // 2,
            ["aux_buffers"],
        ),
        (
            "[2026-09-01 10:00:02] CUDA IPC multimodal feature pools reserve 4096 MiB total on GPU 0 (1024 MiB per "
            "tokenizer worker × 4; configured budget 4096 MiB).",
            "multimodal_pool",
            None,
            "0",
            1024 * MIB,
            MIB // 2,
            ["aux_buffers"],
        ),
        (
            "[2026-02-01 10:00:02] MmItemMemoryPool size per tokenizer worker: 512 MiB (budget 1024 MiB / 2 worker(s))",
            "multimodal_pool",
            None,
            None,
            512 * MIB,
            MIB // 2,
            ["aux_buffers"],
        ),
        (
            "[2026-11-01 10:00:02] Creating a 256 MiB CUDA IPC pool on GPU 2 for GPU-resident embedding overrides "
            "(SGLANG_MM_FEATURE_CACHE_MB).",
            "multimodal_pool",
            None,
            "2",
            256 * MIB,
            MIB // 2,
            ["aux_buffers"],
        ),
        (
            "[2025-12-01 10:00:02 TP0] Preallocated 1024MB GPU buffer",
            "multimodal_pool",
            None,
            None,
            1024 * MIB,
            MIB // 2,
            ["aux_buffers"],
        ),
        (
            "[2026-10-01 10:00:02 TP0] HiCache staging prepared before KV sizing: 1536.0 MiB, 61 layers",
            "staging",
            None,
            None,
            1536 * MIB,
            52429,
            ["aux_buffers"],
        ),
        (
            "[2026-11-01 10:00:02 TP0] gfx950 fused DSA indexer: workspace preallocated (max_cols=65536, 96 MiB) "
            "before pool sizing",
            "kernel_workspace",
            None,
            None,
            96 * MIB,
            MIB // 2,
            ["aux_buffers"],
        ),
        (
            "[2026-12-01 10:00:02 TP0] Page-interleave KV sharding enabled: shard_rank=0 shard_size=4 page_size=64 "
            "prefix_tokens=131072 chunk_tokens=8192 scratch_rows=2048 x2 (301.50 MiB per rank, charged against the "
            "KV budget), NCCL symmetric scratch=True. Batch admission is limited by this scratch capacity",
            "kernel_workspace",
            None,
            None,
            round(301.5 * MIB),
            5243,
            ["aux_buffers"],
        ),
        (
            "[2026-10-01 10:00:02 TP2] K3 symm buffer 'moe_out': 8192 rows x 7168, 112.0 MB (rendezvoused once on "
            "first use; no per-forward symmetric allocation)",
            "symmetric_memory",
            None,
            None,
            112 * MIB,
            52429,
            ["aux_buffers"],
        ),
        (
            "[2026-06-01 10:00:02 TP0] Full-CG prefill workspace: 384 MB (max bucket 8192 tokens, 16 request slots)",
            "graph_workspace",
            None,
            None,
            384 * MIB,
            MIB // 2,
            [],
        ),
        # held inside another figure or for a while: an event, no consumer of its own
        (
            "[2026-08-01 10:00:00 TP0] All Reduce config: symmetric_memory = 72.06 MB, local_buffer = 0.03 MB, "
            "multicast = True, pull = False",
            "allreduce_buffers",
            None,
            None,
            round(72.06 * MIB) + round(0.03 * MIB),
            2 * 5243,
            [],
        ),
        (
            "[2026-07-20 10:00:00 TP0] All Reduce config: symmetric_memory = 16.00 MB, local_buffer = 0.01 MB, "
            "multicast = False",
            "allreduce_buffers",
            None,
            None,
            16 * MIB + round(0.01 * MIB),
            2 * 5243,
            [],
        ),
        (
            "[2026-09-01 10:00:05 TP1] Initialized DeepEP v2 ElasticBuffer: world_size=8 hidden_size=7168 num_topk=8 "
            "max_dispatch_tokens_per_rank=256 use_fp8_dispatch=True allow_hybrid_mode=False num_bytes=2147483648",
            "dispatch_buffer",
            None,
            None,
            2147483648,
            None,
            [],
        ),
        (
            "[2026-11-01 10:00:03 TP0] engram peer shards layer 3: 8 ranks over POSIX fd, 1.25 GiB local, "
            "mapped in 0.4 s",
            "weights_buffer",
            "layer 3",
            None,
            round(1.25 * GIB),
            5368710,
            [],
        ),
        (
            "[2026-11-01 10:00:03 TP0] monokernel qwen3_moe on gfx950: widths [1, 2] built in 12.3 s, 512.5 MiB; "
            "wait deadline 600 s (a failed wait stops every rank with a GPU fault at address 0x0); weight copies: none",
            "weights_buffer",
            "qwen3_moe",
            None,
            round(512.5 * MIB),
            52429,
            [],
        ),
        (
            "[2026-11-01 10:00:03 TP0] Muse nvfp4xnvfp4 MegaMoE shares TRT weights; extra metadata 0.012 GiB",
            "weights_buffer",
            None,
            None,
            round(0.012 * GIB),
            536871,
            [],
        ),
        (
            "[2026-09-01 10:00:03 TP0] Expert pack ready: entries=60 resident_experts=0 dense_bytes=external "
            "staged_bytes=4194304 cache_capacity_experts=128 cache_capacity_bytes=536870912",
            "weights_buffer",
            None,
            None,
            536870912,
            None,
            [],
        ),
        (
            "[2026-06-01 10:00:09] Pre-allocating GPU buffer for mooncake RDMA: req_id=7f3c2a1b9e, size=25165824 bytes",
            "request_buffer",
            None,
            None,
            25165824,
            None,
            [],
        ),
        # built after the weights are measured and before the KV cache is sized: an aux buffer
        (
            "[2026-11-01 10:00:04 TP0] NVIDIA megakernel: active (k3_decode: 61 layers; widths [1, 2, 4]; fp8 "
            "numerics; built in 30.1 s, 812.4 MiB; wait deadline 600 s)",
            "kernel_workspace",
            "k3_decode",
            None,
            round(812.4 * MIB),
            52429,
            ["aux_buffers"],
        ),
        # the Mamba pool's ring buffers, beside the states `Mamba Cache is allocated` states: each part's rounding adds
        (
            "[2026-07-01 10:00:02 TP0] GDN ReplaySSM ring buffers allocated (L=16): d=1.250GB, k=0.625GB, g=0.010GB ",
            "ssm_replay_ring",
            None,
            None,
            round(1.25 * GIB) + round(0.625 * GIB) + round(0.01 * GIB),
            3 * 536871,
            ["mamba_pool"],
        ),
        (
            "[2026-10-01 10:00:02 TP0] GDN ReplaySSM ring buffers allocated (record_len=16, fold=True): d=1.250GB, "
            "k=0.625GB, g=0.010GB rawv=0.500GB, rawk=0.250GB, beta=0.002GB ",
            "ssm_replay_ring",
            None,
            None,
            sum(round(x * GIB) for x in (1.25, 0.625, 0.01, 0.5, 0.25, 0.002)),
            6 * 536871,
            ["mamba_pool"],
        ),
        (
            "[2026-10-01 10:00:02 TP0] GDN ReplaySSM ring buffers allocated (record_len=4, fold=False): d=0.000GB, "
            "k=0.000GB, g=0.010GB rawv=0.500GB, rawk=0.250GB, ",
            "ssm_replay_ring",
            None,
            None,
            sum(round(x * GIB) for x in (0.01, 0.5, 0.25)),
            5 * 536871,
            ["mamba_pool"],
        ),
    ],
)
def test_each_wording_reads_its_buffer_and_its_consumer(
    line: str,
    kind: str,
    name: str | None,
    device: str | None,
    size_bytes: int,
    spread: int | None,
    consumers: list[str],
) -> None:
    event = _event(line)
    assert (event["event"], event["schema_version"]) == ("memory.buffer_allocated", 2)
    assert (event["kind"], event["name"], event["device"], event["size_bytes"]) == (kind, name, device, size_bytes)
    # whole bytes (``num_bytes=N``) hide no rounding
    assert event["migrated"].get("uncertainty_bytes") == (None if spread is None else {"size_bytes": spread})
    assert _consumers(event) == consumers


def test_the_ledger_adds_the_replayssm_rings_to_their_mamba_pool_and_no_buffer_held_inside_another_figure(
    tmp_path: Path,
) -> None:
    """The rings are the Mamba pool's, beside the states its own line states; the all-reduce's buffers (printed
    while torch distributed initialises, inside its cost; rank 0's line alone) and the weights' load's own
    buffers are not added again."""
    log = tmp_path / "sglang.log"
    log.write_text(
        "[2026-07-01 10:00:00 TP0] All Reduce config: symmetric_memory = 72.06 MB, local_buffer = 0.03 MB, "
        "multicast = True\n"
        "[2026-07-01 10:00:00 TP0] Init torch distributed ends. elapsed=1.20 s, mem usage=0.50 GB\n"
        "[2026-07-01 10:00:01 TP0] Load weight begin. avail mem=78.00 GB\n"
        "[2026-07-01 10:00:02 TP0] engram peer shards layer 0: 8 ranks over FABRIC, 1.25 GiB local, mapped in 0.4 s\n"
        "[2026-07-01 10:00:03 TP0] Load weight end. elapsed=2.00 s, type=Qwen3NextForCausalLM, "
        "dtype=torch.bfloat16, avail mem=60.00 GB, mem usage=18.00 GB.\n"
        "[2026-07-01 10:00:04 TP0] Mamba Cache is allocated. max_mamba_cache_size: 512, conv_state size: 0.50GB, "
        "ssm_state size: 4.00GB \n"
        "[2026-07-01 10:00:04 TP0] GDN ReplaySSM ring buffers allocated (L=16): d=1.250GB, k=0.625GB, g=0.010GB \n"
        "[2026-07-01 10:00:05 TP0] Memory pool end. avail mem=20.00 GB\n"
    )
    out = io.BytesIO()
    assert commands.ledger([str(log)], output_format="json", stdout=out).exit_status == 0
    [row] = json.loads(out.getvalue())["rows"]
    figures = (0.5, 4.0, 1.25, 0.625, 0.01)
    assert row["consumers"]["mamba_pool_bytes"] == sum(round(x * GIB) for x in figures)
    assert row["uncertainty_bytes"]["mamba_pool_bytes"] == 2 * 5368710 + 3 * 536871
    assert row["evidence"]["mamba_pool_bytes"] == [f"{log}:6", f"{log}:7"]
    assert row["consumers"]["runtime_bytes"] == round(0.5 * GIB)
    assert row["consumers"]["weights_bytes"] == 18 * GIB
    assert row["consumers"]["aux_buffers_bytes"] is None
