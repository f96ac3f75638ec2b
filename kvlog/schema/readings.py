"""What some event fields measure, for every reader of events that shows memory (gauges, pictures).

The catalog says each field's type; it does not say that ``avail_bytes`` of a pool-end line and
``free_bytes`` of a post-capture line are the same reading, free device memory, while
``kv_pool.memory_available``'s ``available_bytes`` is not (it is the budget set aside for the KV
cache, memory the pool is about to take). Two readers deciding that apart would one day disagree on
a dashboard and a picture of the same log, so the decision lives here.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

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
    }
)
