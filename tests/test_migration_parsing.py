"""Reading sglang lines: every generation's wording, prefixes, rounding, and the template round trip.

The parser and the console renderer share the templates of ``kvlog.text.wording``; the round-trip
properties check that a line rendered from any event reads back to the same figures, within the
precision the line prints.
"""

from __future__ import annotations

import io
from decimal import Decimal
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvlog.migration import load_chain
from kvlog.migration.candidates import segments, split
from kvlog.migration.engine import MigrateOptions, Migrator
from kvlog.migration.grammar import Rule
from kvlog.migration.sampling import USAGE_EVENT
from kvlog.schema.event_validator import EventValidator
from kvlog.text.prefix import SGLANG, rank_tags
from kvlog.text.template import PLACEHOLDER, SCALED, SKIP, UNITS, FieldSyntax, Template, read_figure, split_sections

CHAIN = load_chain()
MIGRATOR = Migrator(CHAIN, MigrateOptions())
GIB = 1 << 30


def migrate_text(text: str, **options: Any) -> list[bytes]:
    out = io.BytesIO()
    migrator = Migrator(CHAIN, MigrateOptions(**options)) if options else MIGRATOR
    migrator.migrate("test.log", io.BytesIO(text.encode()), out)
    *lines, last = out.getvalue().split(b"\n")
    return [line + b"\n" for line in lines] + ([last] if last else [])


def asked(rule: Rule) -> dict[str, Any]:
    """The options under which a rule's lines are read: a usage line only with ``usage``."""
    return {"usage": "all"} if rule.template.event == USAGE_EVENT else {}


def one_event(line: str) -> dict[str, Any]:
    (out,) = migrate_text(line + "\n")
    event = orjson.loads(out)
    assert isinstance(event, dict), out
    return event


LINES = [
    # (line, event, source format, fields that must be exactly so)
    (
        "KV Cache is allocated. K size: 1.00 GB, V size: 2.00 GB.",
        "kv_pool.allocation",
        "sglang-text/2025-01",
        {"layout": "mha", "k_bytes": GIB, "v_bytes": 2 * GIB, "num_tokens": None, "dtype": None, "label": None},
    ),
    (
        "KV Cache is allocated. KV size: 0.50 GB.",
        "kv_pool.allocation",
        "sglang-text/2025-01",
        {"layout": "mla", "kv_bytes": GIB // 2},
    ),
    (
        "KV Cache is allocated. #tokens: 7, K size: 1.00 GB, V size: 1.50 GB",
        "kv_pool.allocation",
        "sglang-text/2025-06",
        {"num_tokens": 7, "v_bytes": 3 * GIB // 2},
    ),
    (
        "KV Cache is allocated. #tokens: 7, KV size: 1.00 GB",
        "kv_pool.allocation",
        "sglang-text/2025-06",
        {"layout": "mla"},
    ),
    (
        "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 9, K size: 1.00 GB, V size: 1.00 GB",
        "kv_pool.allocation",
        "sglang-text/2026-06",
        {"dtype": "torch.float8_e4m3fn"},
    ),
    (
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 9, KV size: 1.00 GB",
        "kv_pool.allocation",
        "sglang-text/2026-06",
        {"layout": "mla", "dtype": "torch.bfloat16"},
    ),
    (
        "Full KV Cache is allocated. dtype: torch.bfloat16, #tokens: 9, K size: 1.00 GB, V size: 1.00 GB",
        "kv_pool.allocation",
        "sglang-text/2026-08",
        {"label": "Full", "allocation_state": "allocated"},
    ),
    (
        "SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 9, KV size: 1.00 GB",
        "kv_pool.allocation",
        "sglang-text/2026-08",
        {"label": "SWA", "layout": "mla"},
    ),
    (
        "SWA KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 9, K size: 1.00 GB, V size: 1.00 GB",
        "kv_pool.allocation",
        "sglang-text/2026-08-05",
        {"label": "SWA", "allocation_state": "va_upper_bound"},
    ),
    (
        "KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 9, KV size: 1.00 GB",
        "kv_pool.allocation",
        "sglang-text/2026-08-05",
        {"label": None, "layout": "mla", "allocation_state": "va_upper_bound"},
    ),
    (
        "SWAKVPool mem usage: 3.00 GB, swa size: 10, full size: 20",
        "kv_pool.swa_summary",
        "sglang-text/2025-01",
        {"total_bytes": 3 * GIB, "swa_tokens": 10, "full_tokens": 20, "allocation_state": "allocated"},
    ),
    (
        "SWAKVPool VA upper bound: 3.00 GB, swa size: 10, full size: 20",
        "kv_pool.swa_summary",
        "sglang-text/2026-08-05",
        {"allocation_state": "va_upper_bound"},
    ),
    (
        "KvVmmArena[3] ready: device=1 reserved=2.0 GiB granularity=2048 KiB",
        "kv_arena.ready",
        "sglang-text/2026-07-postcapture",
        {"arena_id": "3", "device": 1, "reserved_va_bytes": 2 * GIB, "granularity_bytes": 2 << 20, "backend": "cuda"},
    ),
    (
        "KvVmmArena[77_3] ready: device=1 reserved_va=2.0 GiB granularity=2048 KiB",
        "kv_arena.ready",
        "sglang-text/2026-08-05",
        {"arena_id": "77_3", "pid": 77, "handle_type": None},
    ),
    (
        "KvVmmArena[77_3] ready: device=1 reserved_va=2.0 GiB granularity=2048 KiB handle_type=8",
        "kv_arena.ready",
        "sglang-text/2026-08-05",
        {"handle_type": "8"},
    ),
    (
        "Post-capture KV sizing: max_total_num_tokens=5, free memory=1.00 GB",
        "kv_pool.post_capture_sized",
        "sglang-text/2026-07-postcapture",
        {"max_total_num_tokens": 5, "free_bytes": GIB},
    ),
    (
        "Allocating 2.00 GB host memory for hierarchical KV cache.",
        "kv_host_pool.allocation",
        "sglang-text/2025-01",
        {"host_bytes": 2 * 10**9, "label": None, "num_tokens": None},
    ),
    (
        "Allocating full hierarchical KV host pool: 12 tokens, 2.00 GB host memory.",
        "kv_host_pool.allocation",
        "sglang-text/2026-08",
        {"label": "full", "num_tokens": 12},
    ),
    (
        "Allocating kv hierarchical KV host pool: 12 tokens, 2.00 GB host memory, packed MTP KV layers: "
        "target_layers=3, draft_layers=1, total_layers=4.",
        "kv_host_pool.allocation",
        "sglang-text/2026-08",
        {"mtp_target_layers": 3, "mtp_draft_layers": 1, "mtp_total_layers": 4},
    ),
    ("Memory pool end. avail mem=4.00 GB", "kv_memory.pool_end", "sglang-text/2025-01", {"avail_bytes": 4 * GIB}),
    ("Load weight begin. avail mem=4.00 GB", "weights.load_begin", "sglang-text/2025-01", {"avail_bytes": 4 * GIB}),
    (
        "Load weight end. type=X, dtype=torch.float16, avail mem=4.00 GB",
        "weights.load_end",
        "sglang-text/2025-01",
        {"model_class": "X", "elapsed_s": None, "mem_usage_bytes": None},
    ),
    (
        "Load weight end. elapsed=1.25 s, type=X, dtype=torch.float16, avail mem=4.00 GB, mem usage=1.00 GB.",
        "weights.load_end",
        "sglang-text/2025-01",
        {"elapsed_s": 1.25, "mem_usage_bytes": GIB},
    ),
    (
        "max_total_num_tokens=10, max_prefill_tokens=20, max_running_requests=30, context_len=40",
        "scheduler.limits",
        "sglang-text/2025-01",
        {"chunked_prefill_size": None, "max_prefill_tokens": 20, "available_gpu_mem_bytes": None},
    ),
    (
        "max_total_num_tokens=10, chunked_prefill_size=-1, max_prefill_tokens=20, max_running_requests=30, "
        "context_len=40, available_gpu_mem=1.00 GB",
        "scheduler.limits",
        "sglang-text/2025-01",
        {"chunked_prefill_size": -1, "available_gpu_mem_bytes": GIB},
    ),
    (
        "The available memory for KV cache is 3.00 GB.",
        "kv_pool.memory_available",
        "sglang-text/2025-01",
        {"available_bytes": 3 * GIB},
    ),
    (
        "Mamba Cache (draft) is allocated. max_mamba_cache_size: 4, conv_state size: 0.10GB, ssm_state size: 0.20GB",
        "mamba_pool.allocation",
        "sglang-text/2025-01",
        {"label": "draft", "max_mamba_cache_size": 4},
    ),
    (
        "Mamba Cache is allocated. max_mamba_cache_size: 4, conv_state size: 0.10GB, ssm_state size: 0.20GB, "
        "intermediate_ssm_state_cache size: 1.00GB, intermediate_conv_window_cache size: 2.00GB",
        "mamba_pool.allocation",
        "sglang-text/2025-01",
        {"intermediate_ssm_state_bytes": GIB},
    ),
]


@pytest.mark.parametrize(("line", "name", "source", "fields"), LINES, ids=[x[0][:48] for x in LINES])
def test_each_wording_reads_into_its_event(line: str, name: str, source: str, fields: dict[str, Any]) -> None:
    event = one_event(f"[2026-01-02 03:04:05 TP0] {line}")
    assert event["event"] == name
    assert event["migrated"]["source_format"] == source
    for key, value in fields.items():
        assert event[key] == value, key


@pytest.mark.parametrize(
    ("prefix", "ranks", "timestamp"),
    [
        ("[2025-03-27 21:33:31] ", None, "2025-03-27T21:33:31Z"),
        ("[2025-03-27 21:33:31 TP0] ", {"tp": 0}, "2025-03-27T21:33:31Z"),
        ("[2025-03-27 21:33:31 DP0 TP0] ", {"dp": 0, "tp": 0}, "2025-03-27T21:33:31Z"),
        ("[2025-03-27 21:33:31 PP1 TP0] ", {"pp": 1, "tp": 0}, "2025-03-27T21:33:31Z"),
        ("[2025-03-27 21:33:31 DP0 TP0 EP0] ", {"dp": 0, "tp": 0, "ep": 0}, "2025-03-27T21:33:31Z"),
        ("[2025-03-27 21:33:31 ATTN_CP5 TP5] ", {"attn_cp": 5, "tp": 5}, "2025-03-27T21:33:31Z"),
        ("[2025-03-27 21:33:31 MOE_DP0] ", {"moe_dp": 0}, "2025-03-27T21:33:31Z"),
        ("[2025-03-27 21:33:31 TP10] ", {"tp": 10}, "2025-03-27T21:33:31Z"),
        ("[2025-03-27 21:33:31] INFO model_runner.py:123: ", None, "2025-03-27T21:33:31Z"),
    ],
)
def test_prefixes_fill_the_envelope(prefix: str, ranks: dict[str, int] | None, timestamp: str) -> None:
    event = one_event(f"{prefix}Memory pool end. avail mem=1.00 GB")
    assert event.get("ranks") == ranks
    assert event["timestamp"] == timestamp
    assert event["migrated"]["inferred"]["timestamp"]["rule"] == "naive-time-as-utc"


def test_custom_prefix_level_is_kept() -> None:
    event = one_event("[2025-03-27 21:33:31] WARNING memory_pool.py:9: Memory pool end. avail mem=1.00 GB")
    assert event["level"] == "warning"


def test_bare_line_takes_the_previous_timestamp_and_says_so() -> None:
    out = migrate_text(
        "[2025-03-27 21:33:31 TP0] Using KV cache dtype: torch.bfloat16\nMemory pool end. avail mem=1.00 GB\n"
    )
    event = orjson.loads(out[1])
    assert event["timestamp"] == "2025-03-27T21:33:31Z"
    assert event["migrated"]["inferred"]["timestamp"] == {
        "rule": "previous-line-timestamp",
        "evidence": "the line has no timestamp; the last one printed before it",
        "evidence_line": 1,
    }
    assert "ranks" not in event


@pytest.mark.parametrize("ending", ["   ", "\r", " \r", "\t"])
def test_trailing_spaces_and_carriage_returns(ending: str) -> None:
    out = migrate_text(f"[2025-03-27 21:33:31 TP0] Memory pool end. avail mem=1.00 GB{ending}\n")
    assert orjson.loads(out[0])["avail_bytes"] == GIB


def test_glued_lines_are_read_and_the_glue_is_kept() -> None:
    before, after = "bar 100%|#####| 2/2\r", "2025-03-27 21:33:31,118 - INFO - x"
    line = f"{before}[2025-03-27 21:33:31 TP0] Memory pool end. avail mem=1.00 GB{after}"
    event = one_event(line)
    assert event["avail_bytes"] == GIB
    assert event["migrated"]["original"] == line
    (text,) = migrate_text(line + "\n", output_format="text")
    assert text.decode() == line + "\n"


@pytest.mark.parametrize(
    "line",
    [
        "[2025-11-20 10:00:02] KV cache hit rate: 89.95%",
        "[2025-11-20 10:00:03 TP0] Cache flushed successfully! KV Cache is allocated again on next request.",
        "KV Cache is allocated. K size: 1.00 GB, V size: 1.00 GB. and more",
        "KV Cache is allocated. K size: 1.0O GB, V size: 1.00 GB.",
        "KvVmmArena[1] ready: device=x reserved=1.0 GiB granularity=2048 KiB",
        "Memory pool end. avail mem=1.00 GBfoo",
    ],
)
def test_near_misses_pass_through_untouched(line: str) -> None:
    assert migrate_text(line + "\n") == [(line + "\n").encode()]


@pytest.mark.parametrize(
    ("text", "unit", "value", "half_width"),
    [
        ("54.12", "gib2", round(Decimal("54.12") * GIB), 5368710),
        ("78.8", "gib1", round(Decimal("78.8") * GIB), 53687092),
        ("2048", "kib", 2 << 20, 0),
        ("40.41", "gb2", 40_410_000_000, 5_000_000),
        ("12", "gib2", 12 * GIB, GIB // 2),
    ],
)
def test_a_printed_figure_carries_its_precision(text: str, unit: str, value: int, half_width: int) -> None:
    assert read_figure(text, unit) == (value, half_width)


def test_companion_lines_are_recognised_not_events() -> None:
    lines = [
        "[2025-01-14 08:02:11] server_args=ServerArgs(model_path='x', tp_size=2)",
        "[2025-01-14 08:02:31 TP0] Using KV cache dtype: torch.bfloat16",
        "[2026-07-21 09:03:41 TP0] Post-capture KV sizing: max_running_requests 4096 -> 2048",
        "[2026-07-21 09:03:41 TP0] Post-capture KV sizing: decode CUDA graph max_bs=256 < max_running_requests=4096; "
        "reserving activation headroom",
        "[2026-07-22 14:01:02 TP0] Use sliding window memory pool. full_layer_tokens=1326400, swa_layer_tokens=1061120",
        "HiCache host KV pool (1 tokens) is smaller than the device pool (2 tokens);L2 cache effectiveness is reduced."
        "Consider increasing --hicache-ratio (or --hicache-size) for higher L2 cache hit rate.",
        "HiCache swa host pool (1 tokens) is smaller than the device pool (2 tokens);L2 cache effectiveness is reduced."
        "Consider increasing --hicache-ratio (or --hicache-size) for higher L2 cache hit rate.",
        "[2026-07-21 09:05:00] The server is fired up and ready to roll!",
    ]
    text = "".join(line + "\n" for line in lines)
    out = io.BytesIO()
    report = MIGRATOR.migrate("c.log", io.BytesIO(text.encode()), out)
    assert out.getvalue() == text.encode()
    assert (report.events, report.unparsed_memory_lines) == (0, 0)
    assert dict(report.companions) == {"run_start": 1, "kv_dtype": 1, "note": 3, "post_capture": 2, "start_up_end": 1}


def test_hostile_long_lines_pass_through() -> None:
    """Anchored, bounded expressions: a very long line near every wording is rejected in one pass."""
    body = "9" * 4_000_000
    hostile = [
        f"KV Cache is allocated. dtype: {'a' * 4_000_000}",
        f"KV Cache is allocated. #tokens: {body}",
        f"Memory pool end. avail mem={body}.{body} GB",
        f"[2025-01-01 00:00:00{' TP1' * 1_000_000}] Memory pool end. avail mem=1.00 GB",
        f"KvVmmArena[{'[' * 4_000_000}] ready: device=0 reserved=1.0 GiB granularity=4 KiB",
        "SWAKVPool mem usage: " + "1.00 GB, " * 500_000,
        "KMLU_C{" * 1_000_000,  # every probe byte, none starting a keyword
        "[2025-01-01 00:00:00 TP0] " + "{" * 4_000_000 + '"schema_version"',
        "KV Cache is allocated. KV size: 1.00 GB." + " " * 4_000_000,
    ]
    text = "".join(line + "\n" for line in hostile)
    assert b"".join(migrate_text(text)) == text.encode()


# -- the round trip: render with a template, read it back --------------------------------------------------


def all_rules() -> list[tuple[str, Rule]]:
    """Every rule that reads an event, but those whose wording prints a figure in parts: they never render a line
    (tests/test_template_sums.py reads them)."""
    return [(g.id, r) for g in CHAIN.generations() for r in g.rules if r.version is not None and not r.template.sums]


RULES = all_rules()
_TEXT = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", min_size=1, max_size=24
).filter(lambda text: text != "None")  # None: how Python prints null


def value_for(rule: Rule, name: str) -> st.SearchStrategy[Any]:
    unit = rule.template.units()[name]
    if unit == "words":  # text that may hold spaces: a few words
        return st.lists(_TEXT, min_size=1, max_size=4).map(" ".join)
    if unit is not None:
        if unit == "kib":
            return st.integers(0, 2**40).map(lambda n: n * 1024)
        if unit == "f2":
            return st.integers(0, 10**7).map(lambda n: n / 100)
        return st.integers(0, 2**50)
    syntax = rule.parser._syntax[name]
    if syntax.choices:
        return st.sampled_from(syntax.choices)
    if syntax.kind == "integer":
        return st.integers(-(10**12) if syntax.signed else 0, 10**12)
    if syntax.kind == "number":
        return st.floats(0, 1e12, allow_nan=False, allow_infinity=False)
    return _TEXT


def field_groups(text: str) -> list[list[str]]:
    """The fields of a template, grouped as they appear together: outside sections, then each section."""
    parts = split_sections(text)
    groups = [[m.group(1) for part in parts if isinstance(part, str) for m in PLACEHOLDER.finditer(part)]]
    groups += [[m.group(1) for m in PLACEHOLDER.finditer(str(part))] for part in parts if isinstance(part, list)]
    return groups


@st.composite
def rendered(draw: st.DrawFn, rules: list[tuple[str, Rule]] = RULES) -> tuple[str, Rule, dict[str, Any], str]:
    source, rule = draw(st.sampled_from(rules))
    template = rule.template
    event: dict[str, Any] = {"event": template.event, **template.when}
    required, *optional = field_groups(template.text)
    for group in [required, *[g for g in optional if draw(st.booleans())]]:
        for name in group:
            event[name] = draw(value_for(rule, name))
    return source, rule, event, template.render(event)


#: events old sglang printed (the current wording of kvlog's own arena and sleep lines cannot carry every field)
SGLANG_EVENTS = {t.event for g in CHAIN.generations("sglang")[:-1] for t, _ in g.templates()}
SGLANG_RULES = [
    (source, rule)
    for source, rule in RULES
    if rule.template.event in SGLANG_EVENTS and source.startswith("sglang-text/")
]
#: every rule of vLLM's eras, each written behind vLLM's own prefix
VLLM_RULES = [(source, rule) for source, rule in RULES if source.startswith("vllm-text/")]


@settings(max_examples=600, deadline=None)
@given(rendered())
def test_render_then_parse_gives_the_figures_back_within_printed_precision(
    case: tuple[str, Rule, dict[str, Any], str],
) -> None:
    _, rule, event, line = case
    parsed = rule.parser.parse(line)
    assert parsed is not None, line
    units = rule.template.units()
    for name in rule.template.fields():
        if event.get(name) is None or name == SKIP:  # ``{_}``: text skipped, no field
            assert name not in parsed.fields
            continue
        unit = units[name]
        if unit is None or unit == "words":
            assert parsed.fields[name] == event[name]
        elif unit == "f2":
            assert abs(parsed.fields[name] - event[name]) <= 0.005 + 1e-9
        elif unit in SCALED:  # kvlog's own lines: 3 significant digits (bytes: within the half-width read)
            spread = parsed.uncertainty_bytes.get(name, 0)
            assert abs(parsed.fields[name] - event[name]) <= max(spread + 1, abs(event[name]) * 5e-3)
        else:
            per_unit, decimals = UNITS[unit]
            spread = parsed.uncertainty_bytes.get(name, 0)
            assert abs(parsed.fields[name] - event[name]) <= spread + 1
            assert spread <= per_unit / 10**decimals / 2 + 1
    assert rule.template.render({**event, **parsed.fields}) == line


@settings(max_examples=300, deadline=None)
@given(rendered(SGLANG_RULES))
def test_a_rendered_line_migrates_to_its_event(case: tuple[str, Rule, dict[str, Any], str]) -> None:
    """Through the whole grammar and chain: a valid event of the same name, at its newest version."""
    _, rule, _, line = case
    out = migrate_text(f"[2026-01-02 03:04:05 TP3] {line}\n", **asked(rule))
    migrated = orjson.loads(out[0])
    assert migrated["event"] == rule.template.event
    assert migrated["ranks"] == {"tp": 3}
    assert migrated["schema_version"] == CHAIN.catalog.latest(rule.template.event)
    assert EventValidator().violations(migrated) == []


@settings(max_examples=200, deadline=None)
@given(rendered(VLLM_RULES))
def test_a_rendered_vllm_line_migrates_to_its_event(case: tuple[str, Rule, dict[str, Any], str]) -> None:
    """The same for vLLM: its prefix gives the ranks and the pid, its lines the event."""
    _, rule, _, line = case
    out = migrate_text(f"(Worker_TP3 pid=77) INFO 01-02 03:04:05 [gpu_worker.py:1] {line}\n", **asked(rule))
    migrated = orjson.loads(out[0])
    assert (migrated["event"], migrated["ranks"], migrated["pid"]) == (rule.template.event, {"tp": 3}, 77)
    assert migrated["schema_version"] == CHAIN.catalog.latest(rule.template.event)
    assert EventValidator().violations(migrated) == []


ALL_RULES = [(g.id, r) for g in CHAIN.generations() for r in g.rules]


@settings(max_examples=400, deadline=None)
@given(rendered(ALL_RULES))
def test_the_reader_looks_at_every_line_a_rule_can_read(case: tuple[str, Rule, dict[str, Any], str]) -> None:
    """The block reader skips lines without a keyword: every wording must contain one."""
    line = f"[2026-01-02 03:04:05 TP3] {case[3]}\n".encode()
    data = b"Decode batch. #running-req: 1\n" + line + b"Decode batch. #running-req: 2\n"
    usage = bool(asked(case[1]))  # a usage line is looked at only when usage is read
    pieces = segments(io.BytesIO(data), usage=True) if usage else split(data, len(data))
    candidates = [data[start:end] for is_candidate, data, start, end in pieces if is_candidate]
    assert candidates == [line]


_TAGS = st.from_regex(r"[a-z]{1,6}(_[a-z]{1,6})?", fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_TAGS, st.integers(0, 999_999), max_size=5), st.integers(0, 86399))
def test_prefix_round_trip(ranks: dict[str, int], seconds: int) -> None:
    """The console's prefix (timestamp and rank tags) reads back into the same envelope."""
    clock = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    prefix = SGLANG.split(f"[2026-03-04 {clock}{rank_tags(ranks)}] Memory pool end. avail mem=1.00 GB")
    assert prefix.ranks == ranks
    assert prefix.timestamp == f"2026-03-04T{clock}Z"
    assert prefix.message == "Memory pool end. avail mem=1.00 GB"


# -- no silent memory line -----------------------------------------------------------------------------------

_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_-=:,.()", min_size=1, max_size=12)
_FIGURE = st.one_of(
    st.builds(
        lambda n, unit: f"{n}{unit}",
        st.decimals(0, 10**6, places=2).map(str),
        st.sampled_from([" GB", "GB", " GiB", " MB", " MiB", " KiB", " TB", "kB"]),
    ),
    st.builds(
        lambda word, n: f"{word} {n}",
        st.sampled_from(["mem", "memory", "Memory", "MEM", "bytes", "Bytes"]),
        st.integers(0, 10**12),
    ),
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(_WORD, max_size=6),
    _FIGURE,
    st.lists(_WORD, max_size=6),
    st.sampled_from(["[2026-01-02 03:04:05 TP0] ", "", "INFO 01-02 03:04:05 [worker.py:1] ", "[gpu_id=0] "]),
)
def test_a_line_that_carries_a_memory_figure_is_never_silent(
    before: list[str], figure: str, after: list[str], prefix: str
) -> None:
    """Whatever its words: read as an event, known as a companion, or reported as unread (and so fails --strict)."""
    line = prefix + " ".join([*before, figure, *after])
    out = io.BytesIO()
    report = MIGRATOR.migrate("any.log", io.BytesIO(f"Decode batch.\n{line}\nDecode batch.\n".encode()), out)
    assert report.events + sum(report.companions.values()) + report.unparsed_memory_lines == 1, line


def test_a_wording_without_its_literals_compiles_no_expression() -> None:
    """A message that lacks a wording's required words fails before its expression is compiled, and only such a one.

    Most wordings a line's start lets through never read a line of a log: compiling each cost more
    than the lines themselves (``TemplateParser._needles``). The words in an optional section are not required.
    """
    template = Template("kv_pool.allocation", "KvVmmArena[{arena_id}] closed: released={released_bytes:iec}{[ note]}")
    parser = template.parser({"arena_id": FieldSyntax("integer")})
    assert parser.parse("KvVmmArena[0] ready: backend=host") is None
    assert "pattern" not in vars(parser)  # the cached expression was never built
    assert parser.parse("KvVmmArena[3] closed: released=1.00 GiB") is not None
    assert parser.parse("KvVmmArena[3] closed: released=1.00 GiB note") is not None
