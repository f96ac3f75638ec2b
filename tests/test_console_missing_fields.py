"""No wording ever prints ``None``: every template, every optional field missing (issue 9, item 21).

A new user's ``kvlog migrate --format text`` printed ``Allocating None hierarchical KV host pool: None
tokens, 99.42 GB host memory.``: the event came from sglang's older line, which said neither label
nor tokens, and today's wording was filled with the missing values. The class: any template whose
fields an event may leave unset. Here every template of today's wording, for every event, is
rendered with every subset of the fields the catalog lets an event leave out (absent, or null where
the field is required but nullable), through the three ways kvlog writes text: the console renderer,
``--format text`` and ``--format legacy`` (every old generation). None of them may print ``None``,
and a line the grammar reads must read back to the event it was written from.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from cli_harness import kvlog_text
from foundation_samples import fields

import kvlog
from kvlog import events
from kvlog.envelope import FIELDS
from kvlog.migration import load_chain
from kvlog.migration.engine import MigrateOptions, Migrator
from kvlog.migration.legacy import LegacyRenderer, current_line
from kvlog.schema.catalog import default_catalog
from kvlog.schema.event_validator import EventValidator
from kvlog.text.console import console_line
from kvlog.text.template import BYTE_UNITS, PLACEHOLDER, Template, split_sections
from kvlog.text.wording import CURRENT, render_message

CATALOG = default_catalog()
CHAIN = load_chain()
VALIDATOR = EventValidator()
MIGRATOR = Migrator(CHAIN, MigrateOptions())
LEGACY = [LegacyRenderer(CHAIN, g.id) for g in CHAIN.generations() if g.catalog_version < CATALOG.newest_release()]
ENVELOPE = frozenset(FIELDS)


def _value(event: dict[str, Any], name: str) -> Any:
    """A plausible value the catalog accepts for a field the sample lacks: an enum's first, else a number or text."""
    schema = CATALOG.schemas[event["event"]][event["schema_version"]]["properties"][name]
    choices = [choice for choice in schema.get("enum", []) if choice is not None]
    sizes = [3 * (1 << 30) + 12345] if name.endswith("_bytes") else []
    candidates = [*choices, *sizes, 12345, 1234.5, "Full"]
    return min(candidates, key=lambda value: len(VALIDATOR.violations({**event, name: value})))


def _full_event(template: Template) -> dict[str, Any]:
    """A valid event at the newest version with every field the template prints set."""
    version = CATALOG.latest(template.event)
    event: dict[str, Any] = {
        "event": template.event,
        "schema_version": version,
        "timestamp": "2026-01-02T03:04:05Z",
        "level": "info",
        "ranks": {"tp": 3},
        **fields(template.event, version),
        **template.when,
    }
    for name in template.fields():
        if event.get(name) is None:
            event[name] = _value(event, name)
    for name in [k for k in event if k not in ENVELOPE and k not in template.fields() and k not in template.when]:
        if VALIDATOR.violations(event):
            trial = {k: v for k, v in event.items() if k != name}
            if len(VALIDATOR.violations(trial)) < len(VALIDATOR.violations(event)):
                event = trial
    assert VALIDATOR.violations(event) == [], (template.text, event)
    return event


def _leave_out(event: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The event without ``name``'s value, as the catalog allows it (absent, else null), or None."""
    for trial in ({k: v for k, v in event.items() if k != name}, {**event, name: None}):
        if not VALIDATOR.violations(trial):
            return trial
    return None


def cases() -> Iterator[tuple[Template, dict[str, Any], tuple[str, ...]]]:
    """Every template with every subset of the fields its event may leave out."""
    for template in CURRENT:
        full = _full_event(template)
        optional = [k for k in full if k not in ENVELOPE and k not in template.when and _leave_out(full, k) is not None]
        for size in range(len(optional) + 1):
            for dropped in itertools.combinations(optional, size):
                event: dict[str, Any] | None = full
                for name in dropped:
                    event = _leave_out(event, name) if event is not None else None
                if event is not None:
                    yield template, event, dropped


CASES = list(cases())


def test_the_cases_cover_every_template_and_the_reported_one() -> None:
    assert {t.text for t, _, _ in CASES} == {t.text for t in CURRENT}
    assert len(CASES) > 300
    assert any(e["event"] == "kv_host_pool.allocation" and {"label", "num_tokens"} <= set(d) for _, e, d in CASES)
    assert not NOT_READ_BACK, NOT_READ_BACK  # every line must read back (sleep and wake once did not)


def _message(line: str) -> str:
    return line.split("] ", 1)[1] if line.startswith("[") else line


@pytest.mark.parametrize("case", range(len(CASES)))
def test_no_writer_prints_none_and_the_line_reads_back_to_the_event(case: int) -> None:
    _, event, dropped = CASES[case]
    lines = {"console": console_line(event), "--format text": current_line(event)}
    lines |= {f"--format legacy {r.chosen}": r.line(event) for r in LEGACY}
    for writer, line in lines.items():
        assert "None" not in line, f"{writer}, without {dropped}: {line}"
    _reads_back(event, _message(lines["console"]))


#: fields the grammar derives from what a line prints (an operation of the rule: a deficit from a figure's sign),
#: or fills where the line cannot say them (a sleep's arenas, inferred)
DERIVED: dict[str, set[str]] = {}
for _generation in CHAIN.generations():
    for _rule in _generation.rules:
        DERIVED.setdefault(_rule.template.event, set()).update(w for op in _rule.ops for w in op.writes)


def _unprinted_required(template: Template) -> set[str]:
    """Fields the schema requires, never null, that no wording of the event prints and no rule of it fills."""
    full = _full_event(template)
    schema = CATALOG.schemas[template.event][full["schema_version"]]
    printed = {f for t in CURRENT if t.event == template.event for f in [*t.fields(), *t.when]}
    unprinted = set(schema["required"]) - ENVELOPE - printed - DERIVED.get(template.event, set())
    return {name for name in unprinted if VALIDATOR.violations({**full, name: None})}


#: events whose line cannot become a valid event again (none may be: the migration would dead-letter it)
NOT_READ_BACK = {t.event for t in CURRENT if _unprinted_required(t)}


def _printed(parts: list[Any], event: dict[str, Any]) -> list[str]:
    """The fields a template's line shows for ``event``: outside sections, and in sections it writes."""
    names: list[str] = []
    for part in parts:
        if isinstance(part, str):
            names += [m.group(1) for m in PLACEHOLDER.finditer(part)]
        else:
            inner = _printed(part, event)
            if all(event.get(name) is not None for name in inner):
                names += inner
    return names


def _reads_back(event: dict[str, Any], message: str) -> None:
    """Through the whole grammar: the line becomes the same event, within the printed precision."""
    out = io.BytesIO()
    MIGRATOR.migrate("t.log", io.BytesIO(f"[2026-01-02 03:04:05 TP3] {message}\n".encode()), out)
    migrated = orjson.loads(out.getvalue())
    assert migrated["event"] == event["event"], message
    assert VALIDATOR.violations(migrated) == []
    spread = migrated["migrated"].get("uncertainty_bytes", {})
    chosen = next(t for t in CURRENT if t.fits(event) and t.render(event) == message)
    units = chosen.units()
    for name in [*_printed(split_sections(chosen.text), event), *chosen.when]:
        expected, got = event.get(name), migrated.get(name)
        if expected is None:
            assert got is None, (name, message, migrated)
        elif units.get(name) in BYTE_UNITS:
            assert abs(got - expected) <= spread.get(name, 0) + 1, (name, message)
        elif isinstance(expected, float):
            assert got == pytest.approx(expected, rel=5e-3, abs=5e-3), (name, message)
        else:
            assert got == expected, (name, message)


def test_the_wording_sglang_used_when_a_host_pool_said_neither_label_nor_tokens() -> None:
    """sglang before 0.5.17 (checked in 0.4.6 and 0.5.10) printed this; 0.5.17 and later printed both fields."""
    event = {"event": "kv_host_pool.allocation", "label": None, "num_tokens": None, "host_bytes": 99_420_000_000}
    assert render_message(event) == "Allocating 99.42 GB host memory for hierarchical KV cache."
    assert render_message({**event, "label": "kv", "num_tokens": 5}) == (
        "Allocating kv hierarchical KV host pool: 5 tokens, 99.42 GB host memory."
    )


OLD_LOG = "".join(
    f"{line}\n"
    for line in (
        "[2025-02-01 09:10:12 TP0] Allocating 99.42 GB host memory for hierarchical KV cache.",
        "[2025-02-01 09:10:12 TP0] KV Cache is allocated. K size: 1.00 GB, V size: 1.00 GB.",
        "[2025-02-01 09:10:13 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, "
        "avail mem=63.12 GB, mem usage=14.96 GB.",
        "[2025-02-01 09:10:15 TP0] Mamba Cache is allocated. max_mamba_cache_size: 64, "
        "conv_state size: 0.07GB, ssm_state size: 3.05GB",
        "[2026-08-03 14:01:03 TP0] Allocating full hierarchical KV host pool: 2652800 tokens, 21.73 GB host memory.",
    )
)


@pytest.mark.parametrize("form", [["--format", "text"], ["--format", "legacy"]])
def test_kvlog_migrate_text_and_legacy_of_an_old_log_print_no_none(tmp_path: Path, form: list[str]) -> None:
    log = tmp_path / "server.log"
    log.write_text(OLD_LOG)
    done = kvlog_text("migrate", *form, log)
    assert done.returncode == 0, done.stderr
    assert "None" not in done.stdout
    lines = done.stdout.splitlines()
    assert lines[0] == "[2025-02-01 09:10:12 TP0] Allocating 99.42 GB host memory for hierarchical KV cache."
    assert lines[-1] == OLD_LOG.splitlines()[-1]


def test_an_event_without_a_wording_leaves_out_fields_without_a_value() -> None:
    report = {
        "event": "kvlog.schema_violation",
        "schema_version": 1,
        "level": "warning",
        "violating_event": None,
        "violating_schema_version": None,
        "errors": [{"path": "$", "message": "an event is a JSON object, not list"}],
    }
    line = console_line(report)
    assert "None" not in line
    assert line.startswith("WARNING kvlog.schema_violation errors=")


def test_the_console_renderer_of_a_typed_event_without_label_or_tokens() -> None:
    stream = io.StringIO()
    kvlog.configure(output="console", validation="raise", stream=stream)
    kvlog.emit(events.KvHostPoolAllocation(label=None, num_tokens=None, host_bytes=99_420_000_000))
    assert stream.getvalue().endswith("] Allocating 99.42 GB host memory for hierarchical KV cache.\n")
