"""Today's wording: the lines kvlog prints for each event, after sglang's 2026-08 fix.

Address space is called what it is (``VA upper bound``, ``reserved_va=``), so an operator no longer
reads reserved addresses as used memory. These templates are written in the template language of
``kvlog.text.template``; the console renderer writes with them, and the migration layer reads today's
lines back with the very same ones (``wording = "current"`` in ``migrations/sglang-text/``), so what
kvlog prints is always what it can read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from kvlog.text.template import Layout, Template, compiled_fits, kind_of, layout

_KV_SIZES_MHA = "K size: {k_bytes:gib2} GB, V size: {v_bytes:gib2} GB"
_KV_SIZES_MLA = "KV size: {kv_bytes:gib2} GB"
_ALLOC_STATE_WORDS = {"allocated": "is allocated.", "va_upper_bound": "VA upper bound."}

#: Today's wording, after sglang's 2026-08 fix: address space is called what it is.
CURRENT: tuple[Template, ...] = (
    *(
        Template(
            "kv_pool.allocation",
            f"{{[{{label:words}} ]}}KV Cache {words} {{[dtype: {{dtype}}, ]}}{{[#tokens: {{num_tokens}}, ]}}{sizes}",
            {"allocation_state": state, "layout": layout},
        )
        for state, words in _ALLOC_STATE_WORDS.items()
        for layout, sizes in (("mha", _KV_SIZES_MHA), ("mla", _KV_SIZES_MLA))
    ),
    Template(
        "kv_pool.swa_summary",
        "SWAKVPool VA upper bound: {total_bytes:gib2} GB, swa size: {swa_tokens}, full size: {full_tokens}",
        {"allocation_state": "va_upper_bound"},
    ),
    Template(
        "kv_pool.swa_summary",
        "SWAKVPool mem usage: {total_bytes:gib2} GB, swa size: {swa_tokens}, full size: {full_tokens}",
        {"allocation_state": "allocated"},
    ),
    # kvlog's host backend, which sglang never had: its arenas are often small
    Template(
        "kv_arena.ready",
        "KvVmmArena[{arena_id}] ready: backend=host reserved_va={reserved_va_bytes:iec} "
        "granularity={granularity_bytes:iec}{[ handle_type={handle_type}]}",
        {"backend": "host"},
    ),
    Template(
        "kv_arena.ready",
        "KvVmmArena[{arena_id}] ready: {[device={device} ]}reserved_va={reserved_va_bytes:gib1} GiB "
        "granularity={granularity_bytes:kib} KiB{[ handle_type={handle_type}]}",
    ),
    # sglang >= 0.5.17: what the target's pool and each draft's pool now commit, after capture
    Template(
        "kv_pool.post_capture_sized",
        "Post-capture KV sizing: KV cache allocated. dtype: {dtype}, #tokens: {max_total_num_tokens}, "
        "KV size: {committed_bytes:gib2} GB, avail mem={free_bytes:gib2} GB",
        {"label": None},
    ),
    # sglang 0.5.16 said only the token slots and the free memory
    Template(
        "kv_pool.post_capture_sized",
        "Post-capture KV sizing: max_total_num_tokens={max_total_num_tokens}, free memory={free_bytes:gib2} GB",
    ),
    Template(
        "kv_pool.post_capture_sized",
        "Post-capture KV sizing: {[{label} ]}KV cache allocated. {[dtype: {dtype}, ]}#tokens: {max_total_num_tokens}"
        "{[, KV size: {committed_bytes:gib2} GB]}{[, avail mem={free_bytes:gib2} GB]}",
    ),
    # sglang >= 0.5.15: a pool shared by every sub-pool, its exact size beside the rounded one
    *(
        Template(
            "kv_pool.unified_allocation",
            f"[unified-memory-pool] UnifiedKVPool {words}: total_bytes={{total_bytes:gib2}} GB (={{total_bytes}} B), "
            "{sub_pools} sub-pool(s)",
            {"allocation_state": state},
        )
        for state, words in (("va_upper_bound", "reserved VA upper bound"), ("allocated", "allocated"))
    ),
    # sglang < 0.5.17 said neither label nor tokens: its wording for that case
    Template(
        "kv_host_pool.allocation",
        "Allocating {host_bytes:gb2} GB host memory for hierarchical KV cache.",
        {"label": None, "num_tokens": None},
    ),
    # sglang >= 0.5.17 always printed both; either alone (kvlog's own events) keeps the rest of the wording
    Template(
        "kv_host_pool.allocation",
        "Allocating {[{label} ]}hierarchical KV host pool: {[{num_tokens} tokens, ]}{host_bytes:gb2} GB host memory"
        "{[, packed MTP KV layers: target_layers={mtp_target_layers}, draft_layers={mtp_draft_layers}, "
        "total_layers={mtp_total_layers}]}.",
    ),
    # One range: the wording from before batches had a count (v1 of both events), read back as one range
    *(
        Template(
            f"kv_arena.{verb}",
            f"KvVmmArena[{{arena_id}}] {verb}: offset={{offset_bytes:iec}} size={{nbytes:iec}} "
            "committed={committed_bytes:iec} "
            "{[measured={measured_committed_bytes:iec} ({measurement_source}) ]}in {duration_us:us}",
            {"range_count": 1},
        )
        for verb in ("commit", "decommit")
    ),
    # A batch (a pool's commit, a sleep): the count of ranges, the lowest offset, the totals after the whole batch
    *(
        Template(
            f"kv_arena.{verb}",
            f"KvVmmArena[{{arena_id}}] {verb}: ranges={{range_count}} from offset={{offset_bytes:iec}} "
            "size={nbytes:iec} committed={committed_bytes:iec} "
            "{[measured={measured_committed_bytes:iec} ({measurement_source}) ]}in {duration_us:us}",
        )
        for verb in ("commit", "decommit")
    ),
    Template("kv_arena.closed", "KvVmmArena[{arena_id}] closed: released={released_bytes:iec}"),
    Template(
        "kv_pool.sleep",
        "{[{label} ]}KV Cache {[{pool} ]}asleep: freed={freed_bytes:iec}{[ measured={measured_freed_bytes:iec} "
        "({measurement_source}, discrepancy={discrepancy_bytes:iec})]} in {duration_us:us}; addresses kept",
    ),
    Template(
        "kv_pool.wake",
        "{[{label} ]}KV Cache {[{pool} ]}awake: restored={restored_bytes:iec}"
        "{[ measured={measured_restored_bytes:iec} ({measurement_source}, discrepancy={discrepancy_bytes:iec})]} "
        "in {duration_us:us}; contents zeroed",
    ),
    Template(
        "kv_arena.error",
        "KvVmmArena[{arena_id}] {operation} failed: {error}; committed={committed_bytes:iec} after rollback",
    ),
    Template("kv_memory.pool_end", "Memory pool end. avail mem={avail_bytes:gib2} GB"),
    Template(
        "mamba_pool.allocation",
        "Mamba Cache {[({label}) ]}is allocated. {[max_mamba_cache_size: {max_mamba_cache_size}, ]}"
        "conv_state size: {conv_state_bytes:gib2}GB, ssm_state size: {ssm_state_bytes:gib2}GB"
        "{[ intermediate_ssm_state_cache size: {intermediate_ssm_state_bytes:gib2}GB]}"
        "{[ intermediate_conv_window_cache size: {intermediate_conv_window_bytes:gib2}GB]}",
    ),
    Template("weights.load_begin", "Load weight begin. avail mem={avail_bytes:gib2} GB"),
    # sglang 0.5.10 on prints the quantization (``quant=gptq, bits=4``) where older lines printed the dtype
    Template(
        "weights.load_end",
        "Load weight end. {[elapsed={elapsed_s:f2} s, ]}{[type={model_class}, ]}{[dtype={dtype}, ]}"
        "{[quant={quantization:words}, ]}avail mem={avail_bytes:gib2} GB{[, mem usage={mem_usage_bytes:gib2} GB.]}",
    ),
    # a load whose free memory the source did not say (vLLM's): every figure it did say, in the same order
    Template(
        "weights.load_end",
        "Load weight end.{[ elapsed={elapsed_s:f2} s,]}{[ type={model_class},]}{[ dtype={dtype},]}"
        "{[ quant={quantization:words},]}{[ mem usage={mem_usage_bytes:gib2} GB.]}",
        {"avail_bytes": None},
    ),
    Template(
        "scheduler.limits",
        "max_total_num_tokens={max_total_num_tokens}{[, chunked_prefill_size={chunked_prefill_size}]}"
        "{[, max_prefill_tokens={max_prefill_tokens}]}{[, max_running_requests={max_running_requests}]}"
        "{[, context_len={context_len}]}{[, available_gpu_mem={available_gpu_mem_bytes:gib2} GB]}"
        "{[, available_cpu_mem={available_cpu_mem_bytes:gib2} GB]}",
    ),
    Template("kv_pool.memory_available", "The available memory for KV cache is {available_bytes:gib2} GB."),
    # vLLM's events, in vLLM's words; a field the source did not print is left out
    Template(
        "kv_pool.capacity",
        "KV cache size:{[ {num_tokens:grouped} tokens]}{[, # GPU blocks: {num_gpu_blocks}]}"
        "{[, # CPU blocks: {num_cpu_blocks}]}{[, Maximum concurrency for {max_model_len:grouped} tokens per request]}"
        "{[: {max_concurrency:f2}x]}{[ on {device:words}]}",
    ),
    Template(
        "memory.profile",
        "Memory profiling results: total_gpu_memory={total_bytes:gib2}GiB "
        "initial_memory_usage={initial_usage_bytes:gib2}GiB peak_torch_memory={peak_torch_bytes:gib2}GiB "
        "memory_usage_post_profile={post_profile_usage_bytes:gib2}GiB "
        "non_torch_memory={non_torch_bytes:gib2}GiB kv_cache_size={kv_cache_bytes:gib2}GiB "
        "gpu_memory_utilization={gpu_memory_utilization:f2}",
    ),
    Template(
        "memory.profile_budget",
        "the current vLLM instance can use total_gpu_memory ({total_bytes:gib2}GiB) x gpu_memory_utilization "
        "({gpu_memory_utilization:f2}) = {budget_bytes:gib2}GiB",
    ),
    Template(
        "memory.profile_usage",
        "model weights take {weights_bytes:gib2}GiB; non_torch_memory takes {non_torch_bytes:gib2}GiB; "
        "PyTorch activation peak memory takes {activation_peak_bytes:gib2}GiB; "
        "the rest of the memory reserved for KV Cache is {kv_cache_bytes:gib2}GiB.",
    ),
    Template(
        "cuda_graph.captured",
        "Graph capturing finished{[ in {elapsed_s} secs]}{[, took {mem_usage_bytes:gib2} GiB]}"
        "{[, avail mem={avail_bytes:gib2} GiB]}",
    ),
    Template(
        "memory.sleep",
        "Sleep mode freed{[ {freed_bytes:gib2} GiB memory]}{[, {in_use_bytes:gib2} GiB memory is still in use]}"
        "{[, {offloaded_bytes:gib2} GiB backed up in CPU]}{[, {discarded_bytes:gib2} GiB discarded]}"
        "{[ for tags {tags:words}]}.",
    ),
    Template(
        "kv_pool.extended",
        "Extended KV cache to {[{num_blocks} blocks ]}({committed_bytes:gib2} GiB){[, {free_bytes:gib2} GiB free]}"
        "{[, {transient_bytes:gib2} GiB kept for transient activations]}"
        "{[, {transient_peak_bytes:gib2} GiB allocated at peak]}"
        "{[, {torch_reserve_growth_bytes:gib2} GiB of torch reservation growth]}{[, blocks of {blocks_bytes:gib2} GiB]}"
        "{[, requested {requested_bytes:gib2} GiB]}{[, torch may reserve up to {torch_limit_bytes:gib2} GiB]}.",
    ),
)


@dataclass(frozen=True, slots=True)
class _Wording:
    """What choosing and writing one template needs, worked out once rather than for every event."""

    template: Template
    fits: Callable[[Mapping[str, Any]], bool]  # ``Template.fits``, the event's name already matched
    render: Callable[[Mapping[str, Any]], str]
    fields: tuple[str, ...]
    printed: frozenset[str]  # a value a wording stands for (its ``when``) is said by it


#: a plan not worked out yet (None is a plan: no wording fits)
_UNKNOWN: Any = object()
#: plans kept per event name: one per combination of chosen-on values and unset fields that events show
_MAX_PLANS = 256


class _Wordings:
    """An event name's wordings, and which one writes an event, worked out once per kind of event.

    Which wording fits, and which of the fitting ones is written, depends only on the values of the
    fields wordings are chosen on (``when``) and on which of the fields they print are None; and
    what a wording writes (which sections, in which units) on the same. So the choice and the chosen
    wording's flat layout are a *plan*, made the first time an event of that kind is written and kept
    by that kind: the next such event costs one look-up and one call of its layout. A plan holds no value
    of an event, so none can be stale. A chosen-on value that cannot be looked up (a list) is chosen
    for from scratch every time, as are kinds beyond the ``_MAX_PLANS`` kept.
    """

    __slots__ = ("kind", "plans", "wordings")

    def __init__(self, wordings: tuple[_Wording, ...]) -> None:
        self.wordings = wordings
        keys = tuple(dict.fromkeys(key for wording in wordings for key in wording.template.when))
        fields = tuple(dict.fromkeys(name for wording in wordings for name in wording.fields))
        self.kind = kind_of(keys, fields)
        self.plans: dict[tuple[Any, ...], Layout | None] = {}

    def render(self, event: Mapping[str, Any]) -> str | None:
        """The line of the wording chosen for ``event``, None if no wording fits it."""
        kind = self.kind(event.get)
        try:
            plan: Layout | None = self.plans.get(kind, _UNKNOWN)
        except TypeError:  # a chosen-on value that cannot be a key: choose for this event alone
            chosen = self.choose(event)
            return None if chosen is None else chosen.render(event)
        if plan is _UNKNOWN:
            chosen = self.choose(event)
            plan = None if chosen is None else layout(chosen.template.text, _unset(chosen.fields, event))
            if len(self.plans) < _MAX_PLANS:
                self.plans[kind] = plan
        return None if plan is None else plan(event)

    def choose(self, event: Mapping[str, Any]) -> _Wording | None:
        """The first wording that fits ``event`` and says all any fitting one could; None if none fits.

        Wordings are listed most specific first (sglang's wording for a case before kvlog's general
        one); a wording that would leave out a set field another fitting wording prints is passed over.
        """
        fitting = [wording for wording in self.wordings if wording.fits(event)]
        if not fitting:
            return None
        for wording in fitting[:-1]:
            if all(
                name in wording.printed for other in fitting for name in other.fields if event.get(name) is not None
            ):
                return wording
        return fitting[-1]


def _unset(fields: tuple[str, ...], event: Mapping[str, Any]) -> set[str]:
    return {name for name in fields if event.get(name) is None}


def _by_event(templates: Sequence[Template]) -> dict[str, _Wordings]:
    """The wordings of each event name, in the order given."""
    index: dict[str, list[_Wording]] = {}
    for template in templates:
        fields = tuple(template.fields())
        printed = frozenset({*fields, *template.when})
        wording = _Wording(template, compiled_fits(template), template.renderer(), fields, printed)
        index.setdefault(template.event, []).append(wording)
    return {name: _Wordings(tuple(wordings)) for name, wordings in index.items()}


@cache
def _current() -> dict[str, _Wordings]:
    """Today's wordings by event, compiled on first use: ``kvlog migrate --format jsonl`` renders none."""
    return _by_event(CURRENT)


def printed_fields(event: Mapping[str, Any]) -> frozenset[str]:
    """The fields today's line of ``event`` says (its wording's fields and the values it is chosen on)."""
    try:
        wordings = _current().get(event.get("event"))  # type: ignore[arg-type]
    except TypeError:
        return frozenset()
    chosen = None if wordings is None else wordings.choose(event)
    if chosen is None:  # no wording: the line is ``name key=value ...`` of every set field
        return frozenset(name for name, value in event.items() if value is not None)
    return chosen.printed


def render_message(event: Mapping[str, Any], templates: Sequence[Template] = CURRENT) -> str | None:
    """The line for ``event`` in the first template that fits it and says all any fitting one could.

    Wordings are listed most specific first (sglang's wording for a case before kvlog's general one);
    a wording that would leave out a set field another fitting wording prints is passed over.
    """
    index = _current() if templates is CURRENT else _by_event(templates)
    try:
        wordings = index.get(event.get("event"))  # type: ignore[arg-type]
    except TypeError:  # a name that is not a string (a caller's list) has no wording
        return None
    return None if wordings is None else wordings.render(event)
