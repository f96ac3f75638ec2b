"""How every reader of events reads JSON values, and what some event fields measure.

Numbers are read and quoted as JSON means them (``json_number``, ``json_integer``, ``json_text``, ``rank_text``): a
reader that asked Python would take ``true`` for 1 and print ``1.0`` where the schema sees 1.

The catalog says each field's type; it does not say that ``avail_bytes`` of a pool-end line and
``free_bytes`` of a post-capture line are the same reading, free device memory, while
``kv_pool.memory_available``'s ``available_bytes`` is not (it is the budget set aside for the KV
cache, memory the pool is about to take). Two readers deciding that apart would one day disagree on
a dashboard and a picture of the same log, so the decision lives here. So does which fields state
the device memory a rank has at most (``DEVICE_MEMORY``), and which fields are a KV pool's size.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple, TypeGuard

#: each event that measures free device memory, and the field it holds it in
FREE_DEVICE_MEMORY: Mapping[str, str] = MappingProxyType(
    {
        "weights.load_begin": "avail_bytes",
        "weights.load_end": "avail_bytes",
        "kv_memory.pool_end": "avail_bytes",
        "cuda_graph.captured": "avail_bytes",
        "kv_pool.post_capture_sized": "free_bytes",
        "kv_pool.extended": "free_bytes",
        "scheduler.limits": "available_gpu_mem_bytes",
        # the driver's word beside a record's (``kvlog integrate --nvml``): what the device had free then
        "device_memory.measured": "device_free_bytes",
    }
)

#: each event that states the device's total memory, and the field
DEVICE_TOTAL: Mapping[str, str] = MappingProxyType(
    {
        "memory.profile": "total_bytes",
        "memory.profile_budget": "total_bytes",
        "memory.startup_summary": "total_bytes",
        "memory.profile_run": "total_bytes",
        "device_memory.measured": "device_total_bytes",
    }
)
#: each event that states how much device memory its rank has at most, and the field: free memory before
#: the weights load (nothing of the run is allocated yet) or the device's total. No pool of the rank and
#: run can hold more; the migration context reads it (``kvlog.migration.context``)
DEVICE_MEMORY: Mapping[str, str] = MappingProxyType(
    {
        "weights.load_begin": "avail_bytes",
        "kv_pool.memory_specified": "initial_free_bytes",
        "memory.profile_sizing": "initial_free_bytes",
        **DEVICE_TOTAL,
    }
)
#: the events of ``DEVICE_MEMORY`` that state the free memory before the weights load: where a run's
#: start-up began, so never the free memory at its end
BEFORE_LOAD: Mapping[str, str] = MappingProxyType(
    {name: field for name, field in DEVICE_MEMORY.items() if name not in DEVICE_TOTAL}
)


class ConsumerReading(NamedTuple):
    """One event's statement of what a consumer of device memory holds: the sum of ``fields`` it sets."""

    consumer: str
    event: str
    fields: tuple[str, ...]
    #: each event is another allocation (a pool each), so they add up; else a later line restates the figure
    adds: bool = False
    #: only the events whose ``kind`` is one of these (an event of several kinds of buffer); empty: every event
    kinds: tuple[str, ...] = ()

    def states(self, event: Mapping[str, object]) -> bool:
        """Whether ``event`` is one this reading reads (its name, and its kind where the reading names kinds)."""
        return event.get("event") == self.event and (not self.kinds or event.get("kind") in self.kinds)


#: every event that states what a consumer of device memory (not the KV cache: ``KV_SET_ASIDE``) holds,
#: one row a (consumer, event): a new wording's event joins with one row. Host memory (``kv_host_pool``)
#: is no consumer of the device; vLLM's ``peak_torch_bytes`` (``memory.profile``) holds the weights and
#: the activations together, so it is no consumer of its own either, and nor is its ``consumed_bytes``
#: (``memory.startup_summary`` from 0.27, ``memory.profile_result``), the weights and non-torch memory in one
DEVICE_CONSUMERS: tuple[ConsumerReading, ...] = (
    ConsumerReading("weights", "weights.load_end", ("mem_usage_bytes",)),
    ConsumerReading("weights", "memory.profile_usage", ("weights_bytes",)),
    ConsumerReading("weights", "memory.profile_result", ("weights_bytes",)),
    ConsumerReading("weights", "memory.startup_summary", ("weights_bytes",)),
    ConsumerReading("weights", "memory.profile_run", ("weights_bytes",)),
    ConsumerReading("non_torch", "memory.profile_usage", ("non_torch_bytes",)),
    ConsumerReading("non_torch", "memory.profile", ("non_torch_bytes",)),
    ConsumerReading("non_torch", "memory.profile_result", ("non_torch_bytes",)),
    ConsumerReading("non_torch", "memory.startup_summary", ("non_torch_bytes",)),
    ConsumerReading("non_torch", "memory.profile_run", ("non_torch_bytes",)),
    ConsumerReading("activation_peak", "memory.profile_usage", ("activation_peak_bytes",)),
    ConsumerReading("activation_peak", "memory.profile_result", ("activation_peak_bytes",)),
    ConsumerReading("activation_peak", "memory.startup_summary", ("activation_peak_bytes",)),
    # sglang's start-up steps before the weights: free memory before each minus after it (NCCL, custom all-reduce)
    ConsumerReading("runtime", "distributed.initialized", ("mem_usage_bytes",), adds=True),
    ConsumerReading("runtime", "memory.baseline", ("mem_usage_bytes",), adds=True),
    # each capture (sglang's main, draft, piecewise, prefill and verify graphs, one line each) is a pool of its own
    ConsumerReading("cuda_graph", "cuda_graph.captured", ("mem_usage_bytes",), adds=True),
    ConsumerReading("cuda_graph", "memory.startup_summary", ("cuda_graph_bytes",)),
    ConsumerReading("cuda_graph", "cuda_graph.estimated", ("actual_bytes",)),
    # the buffers that are no other consumer's. Not these: the graph pools sglang pre-carves and the workspace
    # FlashInfer allocates while the prefill graph is captured (inside a capture's cost); vLLM's workspace and
    # decode buffer pools (grown in the profile run and the capture: activation_peak, cuda_graph), its verify
    # records, candidate buffers and Kimi K3's CAKE workspace (allocated with the model: weights), a weight-cache
    # daemon's weights (another process's memory: the engine's rank leaves it unaccounted). vLLM's prefetch pool
    # and specialized decodes' repacked weights are allocated after the load is measured, its routed-experts
    # capture buffer after the KV cache is sized. Nor sglang's weights_buffer (inside the weights' load),
    # allreduce_buffers (inside torch distributed's cost or the load, printed by rank 0 alone), dispatch_buffer
    # (DeepEP's, built within a capture before 0.5.22) and request_buffer (one request's, freed with it)
    ConsumerReading(
        "aux_buffers",
        "memory.buffer_allocated",
        ("size_bytes",),
        adds=True,
        kinds=(
            "embedding_pool",
            "kernel_workspace",
            "mamba_checkpoint",
            "multimodal_pool",
            "prefetch_pool",
            "repacked_weights",
            "staging",
            "state_capture",
            "symmetric_memory",
        ),
    ),
    ConsumerReading(
        "mamba_pool",
        "mamba_pool.allocation",
        ("conv_state_bytes", "ssm_state_bytes", "intermediate_ssm_state_bytes", "intermediate_conv_window_bytes"),
        adds=True,
    ),
    # the ring buffers GDN ReplaySSM allocates in the Mamba pool beside the states its allocation line states
    ConsumerReading("mamba_pool", "memory.buffer_allocated", ("size_bytes",), adds=True, kinds=("ssm_replay_ring",)),
)
#: each event that states the device memory set aside for the KV cache, which the engine then allocates
#: at once (vLLM): the KV memory of a run whose log prints no pool
KV_SET_ASIDE: Mapping[str, str] = MappingProxyType(
    {
        "kv_pool.memory_available": "available_bytes",
        "memory.profile_usage": "kv_cache_bytes",
        "memory.profile": "kv_cache_bytes",
        "kv_pool.memory_specified": "kv_cache_bytes",
        "memory.profile_sizing": "kv_cache_bytes",
        "memory.startup_summary": "kv_cache_bytes",
    }
)
#: each event that states the device memory the engine may use in all (total times its utilization)
MEMORY_BUDGET: Mapping[str, str] = MappingProxyType(
    {
        "memory.profile_budget": "budget_bytes",
        "memory.profile_sizing": "budget_bytes",
        "memory.startup_summary": "budget_bytes",
    }
)
#: the fields that together are a KV pool's size: K and V of an MHA pool, ``kv_bytes`` of an MLA one, a total
POOL_SIZE_FIELDS: tuple[tuple[str, ...], ...] = (("kv_bytes",), ("k_bytes", "v_bytes"), ("total_bytes",))


def pool_size_fields(event: Mapping[str, object]) -> tuple[str, ...] | None:
    """The fields whose sum is the pool's size in ``event``, the first complete set; None when none is."""
    for names in POOL_SIZE_FIELDS:
        if all(json_integer(event.get(name)) is not None for name in names):
            return names
    return None


def json_number(value: object) -> TypeGuard[int | float]:
    """Whether ``value`` is a JSON number: an int or a float, never a bool.

    Python's ``bool`` is an ``int``, so a bare ``isinstance`` takes JSON ``true`` for the number 1;
    every reader of events and schemas asks here instead, so none of them forgets the exception.
    """
    return isinstance(value, int | float) and not isinstance(value, bool)


def json_integer(value: object) -> int | None:
    """The integer a JSON value is, or None: an integer, or a number with no fractional part (``5.0``).

    JSON Schema's ``integer`` is any number whose fractional part is zero, and numbers compare by
    value, so ``5.0`` is the integer 5 to every schema and every reader of events; ``true`` is not
    a number, although Python's ``bool`` is an ``int``. Numbers that keep their text
    (``kvlog.io.jsonline.exact``) count by their value.
    """
    if type(value) is int:  # nearly every value asked about: the rest of the tests are for what is not
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def migrated_line(event: Mapping[str, object]) -> int | None:
    """The input line a migrated event was read from (``migrated.line``; 3.0 is line 3); None for a live one."""
    migrated = event.get("migrated")
    return json_integer(migrated.get("line")) if isinstance(migrated, Mapping) else None


def json_text(value: object) -> str:
    """How a message quotes a value read from JSON: as JSON writes it (``true``, ``null``, ``1.0``), not as Python does.

    A user reads ``schema_version@true`` in the file they are told about; ``True`` or ``None`` is not
    in it. A value no JSON holds (a caller's own object, a key that is no string, a cycle) is quoted by
    its ``repr``: a message about a bad value must not fail on it.
    """
    try:
        return json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def rank_text(rank: object) -> str:
    """A rank as a prefix prints it: the integer it is (``1.0`` is rank 1, printed ``1``), else its JSON text."""
    number = json_integer(rank)
    return str(number) if number is not None else json_text(rank)
