"""Human wording of events: the lines sglang prints, as declarative templates.

A template is text with ``{field:unit}`` placeholders and ``{[...]}`` sections that are rendered
only when every field inside them is set. Units say how a byte count is printed, and so how precise a
figure read back from such a line is: ``gib2`` is GiB with two decimals, ``gib1`` one decimal,
``kib`` whole KiB, ``gb2`` decimal GB (host memory) with two decimals. The same templates are the
grammar the migration layer reads old lines with; ``CURRENT`` is today's wording.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

GIB = 1 << 30
KIB = 1 << 10
GB = 10**9

#: unit name -> (bytes per printed unit, decimals printed)
UNITS: dict[str, tuple[int, int]] = {"gib2": (GIB, 2), "gib1": (GIB, 1), "kib": (KIB, 0), "gb2": (GB, 2)}

_PLACEHOLDER = re.compile(r"\{(\w+)(?::(\w+))?\}")
SECTION_OPEN, SECTION_CLOSE = "{[", "]}"
_SECTION_MARK = re.compile(r"\{\[|\]\}")


@dataclass(frozen=True)
class Template:
    """One wording of one event, chosen when every ``when`` field of the event has the given value."""

    event: str
    text: str
    when: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, event: Mapping[str, Any]) -> bool:
        """Whether this wording applies to ``event``."""
        return event.get("event") == self.event and all(event.get(k) == v for k, v in self.when.items())

    def render(self, event: Mapping[str, Any]) -> str:
        """The line for ``event``; optional sections whose fields are unset are left out."""
        return _render_sections(self.text, event)


def format_value(value: Any, unit: str | None) -> str:
    """Print one field as the template's unit says."""
    if unit is None:
        return str(value)
    per_unit, decimals = UNITS[unit]
    if decimals == 0:
        return str(value // per_unit)
    return f"{value / per_unit:.{decimals}f}"


def split_sections(text: str) -> list[str | list[Any]]:
    """Parse a template into literal/placeholder text and nested optional sections (lists)."""
    root: list[Any] = []
    stack = [root]
    position = 0
    for match in _SECTION_MARK.finditer(text):
        stack[-1].append(text[position : match.start()])
        if match.group() == SECTION_OPEN:
            section: list[Any] = []
            stack[-1].append(section)
            stack.append(section)
        elif len(stack) == 1:
            raise ValueError(f"unbalanced {SECTION_CLOSE} in template {text!r}")
        else:
            stack.pop()
        position = match.end()
    if len(stack) != 1:
        raise ValueError(f"unbalanced {SECTION_OPEN} in template {text!r}")
    root.append(text[position:])
    return root


def _render_sections(text: str, event: Mapping[str, Any]) -> str:
    return _render_parts(split_sections(text), event)


def _render_parts(parts: list[Any], event: Mapping[str, Any]) -> str:
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            out.append(_fill(part, event))
        elif all(event.get(name) is not None for name in _fields_in(part)):
            out.append(_render_parts(part, event))
    return "".join(out)


def _fields_in(parts: list[Any]) -> list[str]:
    names: list[str] = []
    for part in parts:
        names += [m.group(1) for m in _PLACEHOLDER.finditer(part)] if isinstance(part, str) else _fields_in(part)
    return names


def _fill(text: str, event: Mapping[str, Any]) -> str:
    return _PLACEHOLDER.sub(lambda m: format_value(event[m.group(1)], m.group(2)), text)


_KV_SIZES_MHA = "K size: {k_bytes:gib2} GB, V size: {v_bytes:gib2} GB"
_KV_SIZES_MLA = "KV size: {kv_bytes:gib2} GB"
_ALLOC_STATE_WORDS = {"allocated": "is allocated.", "va_upper_bound": "VA upper bound."}

#: Today's wording, after sglang's 2026-08 fix: address space is called what it is.
CURRENT: tuple[Template, ...] = (
    *(
        Template(
            "kv_pool.allocation",
            f"{{[{{label}} ]}}KV Cache {words} {{[dtype: {{dtype}}, ]}}{{[#tokens: {{num_tokens}}, ]}}{sizes}",
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
    Template(
        "kv_arena.ready",
        "KvVmmArena[{arena_id}] ready: {[device={device} ]}reserved_va={reserved_va_bytes:gib1} GiB "
        "granularity={granularity_bytes:kib} KiB{[ handle_type={handle_type}]}",
    ),
    Template(
        "kv_pool.post_capture_sized",
        "Post-capture KV sizing: max_total_num_tokens={max_total_num_tokens}, free memory={free_bytes:gib2} GB",
    ),
    Template(
        "kv_host_pool.allocation",
        "Allocating {label} hierarchical KV host pool: {num_tokens} tokens, {host_bytes:gb2} GB host memory."
        "{[, packed MTP KV layers: target_layers={mtp_target_layers}, draft_layers={mtp_draft_layers}, "
        "total_layers={mtp_total_layers}.]}",
    ),
    *(
        Template(
            f"kv_arena.{verb}",
            f"KvVmmArena[{{arena_id}}] {verb}: offset={{offset_bytes}} size={{nbytes}} B "
            "committed={committed_bytes} B "
            "{[measured={measured_committed_bytes} B ({measurement_source}) ]}in {duration_us} us",
        )
        for verb in ("commit", "decommit")
    ),
    Template("kv_arena.closed", "KvVmmArena[{arena_id}] closed: released={released_bytes} B"),
    Template(
        "kv_arena.error",
        "KvVmmArena[{arena_id}] {operation} failed: {error}; committed={committed_bytes} B after rollback",
    ),
    Template("kv_memory.pool_end", "Memory pool end. avail mem={avail_bytes:gib2} GB"),
    Template(
        "mamba_pool.allocation",
        "Mamba Cache {[({label}) ]}is allocated. max_mamba_cache_size: {max_mamba_cache_size}, "
        "conv_state size: {conv_state_bytes:gib2}GB, ssm_state size: {ssm_state_bytes:gib2}GB",
    ),
)


def render(event: Mapping[str, Any], templates: Sequence[Template] = CURRENT) -> str | None:
    """The line for ``event`` in the first template that applies; None when none does."""
    for template in templates:
        if template.matches(event):
            return template.render(event)
    return None
