"""Valid sample events for every event version of the shipped catalog, shared by the foundation tests.

The events of the contract are kept by hand (not derived from the schemas), so that the tests
compare two independent descriptions. An event added later gets a sample generated from its schema
(``generated_fields``); when that generic sample is not valid (a conditional schema, a pattern), the
tests say so and a hand-written sample belongs in ``FIELDS``.
"""

from __future__ import annotations

from typing import Any

from kvlog.envelope import FIELDS
from kvlog.schema.catalog import default_catalog

ENVELOPE = frozenset(FIELDS)
GIB = 1 << 30

#: (event, version) -> the event's own fields (no envelope)
FIELDS: dict[tuple[str, int], dict[str, Any]] = {
    ("kv_arena.closed", 1): {"arena_id": "4242_0", "released_bytes": 2 * GIB},
    ("kv_arena.commit", 1): {
        "arena_id": "4242_0",
        "offset_bytes": 0,
        "nbytes": GIB,
        "committed_bytes": GIB,
        "measured_committed_bytes": GIB,
        "duration_us": 812.5,
        "requested_nbytes": GIB - 4096,
        "measurement_source": "smaps_rss",
    },
    ("kv_arena.decommit", 1): {
        "arena_id": "4242_0",
        "offset_bytes": 0,
        "nbytes": GIB,
        "committed_bytes": 0,
        "measured_committed_bytes": None,
        "duration_us": 95.0,
    },
    ("kv_arena.error", 1): {
        "arena_id": "4242_0",
        "operation": "commit",
        "error": "CUDA_ERROR_OUT_OF_MEMORY",
        "committed_bytes": GIB,
        "offset_bytes": GIB,
        "nbytes": 64 * GIB,
    },
    ("kv_arena.ready", 1): {"arena_id": "0", "device": 0, "reserved_bytes": 12 * GIB, "granularity_bytes": 2 << 20},
    ("kv_arena.ready", 2): {
        "arena_id": "4242_0",
        "backend": "cuda",
        "device": 0,
        "reserved_va_bytes": 12 * GIB,
        "granularity_bytes": 2 << 20,
        "handle_type": "posix_fd",
    },
    ("kv_host_pool.allocation", 1): {"label": "kv", "num_tokens": 131072, "host_bytes": 4_000_000_000},
    ("kv_memory.pool_end", 1): {"avail_bytes": 40 * GIB},
    ("kv_pool.allocation", 1): {
        "label": None,
        "layout": "mha",
        "dtype": "torch.bfloat16",
        "num_tokens": 65536,
        "k_bytes": GIB,
        "v_bytes": GIB,
    },
    ("kv_pool.allocation", 2): {
        "pool": "MHATokenToKVPool",
        "label": None,
        "layout": "mha",
        "allocation_state": "va_upper_bound",
        "dtype": "torch.bfloat16",
        "num_tokens": 65536,
        "k_bytes": GIB,
        "v_bytes": GIB,
        "committed_bytes": 0,
    },
    ("kv_pool.post_capture_sized", 1): {
        "max_total_num_tokens": 32768,
        "free_bytes": 3 * GIB,
        "budget_bytes": GIB,
        "committed_bytes": None,
    },
    ("kv_pool.post_capture_sized", 2): {
        "label": "draft",
        "dtype": "torch.bfloat16",
        "max_total_num_tokens": 4096,
        "free_bytes": None,
        "budget_bytes": None,
        "committed_bytes": GIB // 4,
    },
    ("kv_pool.unified_allocation", 1): {
        "allocation_state": "va_upper_bound",
        "total_bytes": 60 * GIB,
        "sub_pools": 3,
        "committed_bytes": None,
    },
    ("kv_pool.swa_summary", 1): {"mem_usage_bytes": GIB, "swa_tokens": 4096, "full_tokens": 8192},
    ("kv_pool.swa_summary", 2): {
        "allocation_state": "va_upper_bound",
        "total_bytes": GIB,
        "swa_tokens": 4096,
        "full_tokens": 8192,
    },
    ("kvlog.schema_violation", 1): {
        "violating_event": "kv_pool.allocation",
        "violating_schema_version": 2,
        "errors": [{"path": "$.num_tokens", "message": "'many' is not of type 'integer', 'null'"}],
    },
    ("mamba_pool.allocation", 1): {
        "label": None,
        "max_mamba_cache_size": 256,
        "conv_state_bytes": 128 << 20,
        "ssm_state_bytes": 512 << 20,
    },
}

#: A second, MLA-shaped allocation: the other branch of the layout condition.
MLA_ALLOCATION: dict[str, Any] = {
    "pool": "MLATokenToKVPool",
    "label": None,
    "layout": "mla",
    "allocation_state": "allocated",
    "dtype": "torch.float8_e4m3fn",
    "num_tokens": 100000,
    "kv_bytes": 3 * GIB,
    "committed_bytes": 3 * GIB,
}


def envelope(event: str, version: int, fields: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A complete, valid event: the name, version and envelope around ``fields``."""
    return {
        "event": event,
        "schema_version": version,
        "timestamp": "2026-12-02T09:00:00.123456Z",
        "level": "info",
        "pid": 4242,
        "ranks": {"tp": 0},
        **fields,
        **extra,
    }


def fields(event: str, version: int) -> dict[str, Any]:
    """The sample fields of ``event@version``: by hand where written, else generated from the schema."""
    if (event, version) in FIELDS:
        return FIELDS[event, version]
    return generated_fields(event, version)


def sample(event: str, version: int) -> dict[str, Any]:
    """The complete sample event of ``event@version``."""
    return envelope(event, version, fields(event, version))


def generated_fields(event: str, version: int) -> dict[str, Any]:
    """Plain values for the required fields of an event, read off its schema."""
    schema = default_catalog().schema(event, version)
    return {
        name: _example(prop)
        for name, prop in schema["properties"].items()
        if name in schema.get("required", ()) and name not in ENVELOPE
    }


def _example(prop: dict[str, Any]) -> Any:
    if "$ref" in prop:
        common = default_catalog().shared["https://kvlog.dev/schemas/_common.json"]["$defs"]
        return _example(common[prop["$ref"].rsplit("/", 1)[1]])
    if "const" in prop:
        return prop["const"]
    if "enum" in prop:
        return next((v for v in prop["enum"] if v is not None), None)
    if "anyOf" in prop:
        return _example(prop["anyOf"][0])
    kinds = prop.get("type")
    kind = next((k for k in kinds if k != "null"), "null") if isinstance(kinds, list) else kinds
    if kind == "integer":
        return max(int(prop.get("minimum", 0)), 1)
    if kind == "array":
        return [_example(prop["items"])] * int(prop.get("minItems", 0))
    return {"number": 1.5, "string": "x", "boolean": True, "null": None, "object": {}}[kind]
