"""sglang's auxiliary device buffers of memory.buffer_allocated v2: each wording's figures, and its ledger consumer.

The sample lines of tests/test_formats.py are written from the harvested format strings with made-up values;
these are lines as a server prints them (the DeviceCache one from sglang issue #26860), each read into its kind
with the bytes the source computes (``/ (1024 * 1024)`` is MiB, ``// (1024 * 1024)`` too), and held to the
consumer ``kvlog ledger`` counts it under: a buffer allocated within a CUDA-graph capture is the capture's.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

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
    ],
)
def test_each_wording_reads_its_buffer_and_its_consumer(
    line: str, kind: str, name: str | None, device: str | None, size_bytes: int, spread: int, consumers: list[str]
) -> None:
    event = _event(line)
    assert (event["event"], event["schema_version"]) == ("memory.buffer_allocated", 2)
    assert (event["kind"], event["name"], event["device"], event["size_bytes"]) == (kind, name, device, size_bytes)
    assert event["migrated"]["uncertainty_bytes"] == {"size_bytes": spread}
    assert _consumers(event) == consumers
