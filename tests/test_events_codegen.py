"""The typed constructors in ``kvlog/events.py`` never drift from the schema files."""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
from foundation_samples import envelope, fields

from kvlog import events
from kvlog.event_base import Event
from kvlog.schema.catalog import default_catalog
from kvlog.schema.codegen import class_name, render_module
from kvlog.schema.event_validator import EventValidator

ROOT = Path(__file__).resolve().parent.parent
ENVELOPE = {"event", "schema_version", "timestamp", "level", "pid", "ranks", "migrated", "ext"}
CATALOG = default_catalog()
CLASSES = {cls.EVENT: cls for cls in events.ALL_EVENTS}
COMMON = CATALOG.shared["https://kvlog.dev/schemas/_common.json"]["$defs"]
JSON_TYPES = {"integer": int, "number": float, "string": str, "boolean": bool, "null": type(None), "object": dict}


def test_the_committed_module_is_a_fresh_generation() -> None:
    committed = (ROOT / "kvlog" / "events.py").read_text()
    assert committed == render_module(CATALOG), "schemas changed: run `python -m kvlog.schema.codegen` and commit"


def test_every_current_event_has_exactly_one_constructor() -> None:
    assert sorted(CLASSES) == CATALOG.events()
    for event, cls in CLASSES.items():
        assert CATALOG.latest(event) == cls.VERSION
        assert cls.__name__ == class_name(event)
        assert getattr(events, cls.__name__) is cls


def _resolve(prop: dict[str, Any]) -> dict[str, Any]:
    ref = prop.get("$ref")
    if ref is None:
        return prop
    assert ref.startswith("../_common.json#/$defs/"), ref
    return {**COMMON[ref.rsplit("/", 1)[1]], **{k: v for k, v in prop.items() if k != "$ref"}}


def _allowed_types(prop: dict[str, Any]) -> set[type]:
    """The Python types of the values a property schema accepts, read from the schema itself."""
    prop = _resolve(prop)
    if "enum" in prop:
        return {type(v) for v in prop["enum"]}
    if "anyOf" in prop:
        return set().union(*(_allowed_types(option) for option in prop["anyOf"]))
    kinds = prop["type"]
    if kinds == "array":
        return {list}
    return {JSON_TYPES[kind] for kind in ([kinds] if isinstance(kinds, str) else kinds)}


def _annotation_types(annotation: Any) -> tuple[set[type], set[Any]]:
    """The runtime types a type hint admits, and the Literal values it restricts strings to."""
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return {type(v) for v in args}, set(args)
    if origin in (typing.Union, __import__("types").UnionType):
        kinds: set[type] = set()
        literals: set[Any] = set()
        for arg in args:
            more_kinds, more_literals = _annotation_types(arg)
            kinds |= more_kinds
            literals |= more_literals
        return kinds, literals
    if annotation is type(None) or annotation is None:
        return {type(None)}, set()
    return {origin or annotation}, set()


@pytest.mark.parametrize("event", CATALOG.events())
def test_fields_types_required_ness_nullability_and_literals_match_the_schema(event: str) -> None:
    cls = CLASSES[event]
    schema = CATALOG.schema(event, cls.VERSION)
    props = {k: v for k, v in schema["properties"].items() if k not in ENVELOPE}
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    assert set(fields) == set(props) | {"ext"}
    assert "ext" in schema["properties"], "ext is the schema's declared place for extensions"
    for name, prop in props.items():
        field = fields[name]
        required = name in schema["required"]
        has_default = field.default is not dataclasses.MISSING
        assert has_default is not required, f"{event}.{name}: required in the schema <=> no default"
        kinds, literals = _annotation_types(hints[name])
        allowed = _allowed_types(prop)
        if not required:
            allowed.add(type(None))  # an optional field left unset is None and omitted
        if float in allowed:
            allowed.add(int)  # JSON numbers include integers, and a Python int is a valid float hint
            kinds.add(int)
        assert kinds == allowed, f"{event}.{name}: annotation {hints[name]} vs schema {prop}"
        enum = _resolve(prop).get("enum")
        if enum is not None:
            assert literals == {v for v in enum if v is not None}, f"{event}.{name}: Literal values"
        else:
            assert not literals, f"{event}.{name}: Literal without an enum"


@pytest.mark.parametrize("event", CATALOG.events())
def test_an_instance_built_with_sample_values_validates(event: str) -> None:
    cls = CLASSES[event]
    sample = fields(event, cls.VERSION)
    instance = cls(**sample)
    assert isinstance(instance, Event)
    assert instance.to_dict() == {"event": event, "schema_version": cls.VERSION, **sample}
    assert pickle.loads(pickle.dumps(instance)) == instance  # events cross processes (--jobs, Ray)
    complete = envelope(event, cls.VERSION, instance.fields())
    assert EventValidator().violations(complete) == []
    with_ext = cls(**sample, ext={"engine": "sglang"})
    assert EventValidator().violations(envelope(event, cls.VERSION, with_ext.fields())) == []


def test_unset_optional_fields_are_left_out_not_sent_as_null() -> None:
    commit = events.KvArenaCommit(
        arena_id="1",
        range_count=1,
        offset_bytes=0,
        nbytes=1,
        committed_bytes=1,
        measured_committed_bytes=None,
        duration_us=1.0,
    )
    assert commit.fields()["measured_committed_bytes"] is None, "required and nullable: sent as null"
    assert "requested_nbytes" not in commit.fields()
    assert "ext" not in commit.fields()


def test_constructors_are_keyword_only_and_immutable() -> None:
    with pytest.raises(TypeError):
        events.KvMemoryPoolEnd(1)  # type: ignore[misc]
    with pytest.raises(TypeError):
        events.KvMemoryPoolEnd(avail_bytes=1, avail_mem_gb=1.0)  # type: ignore[call-arg]
    pool_end = events.KvMemoryPoolEnd(avail_bytes=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        pool_end.avail_bytes = 2  # type: ignore[misc]


@pytest.mark.parametrize("event", CATALOG.events())
def test_each_field_holds_its_own_argument_and_the_event_stays_a_frozen_dataclass(event: str) -> None:
    """The generated ``__init__`` sets slots by position in a table of setters: each must be its own field's."""
    cls = CLASSES[event]
    names = [field.name for field in dataclasses.fields(cls)]
    values = {name: object() for name in names}  # a distinct value per field, so any mix-up shows
    instance = cls(**values)
    assert {name: getattr(instance, name) for name in names} == values
    optional = [f.name for f in dataclasses.fields(cls) if f.default is None]
    bare = cls(**{name: values[name] for name in names if name not in optional})
    assert all(getattr(bare, name) is None for name in optional), "an optional field left out is None"
    assert "ext" in optional
    assert dataclasses.replace(instance, ext=None) == cls(**(values | {"ext": None}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(instance, names[0], 1)
    missing = [name for name in names if name not in optional]
    if missing:
        with pytest.raises(TypeError, match=missing[0]):
            cls(**{name: values[name] for name in names if name != missing[0]})


def test_mypy_rejects_a_wrong_field_name_and_a_wrong_type(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from kvlog import events\n"
        "events.KvMemoryPoolEnd(avail_gb=1.0)\n"
        "events.KvPoolSwaSummary(allocation_state='reserved', total_bytes=1, swa_tokens=1, full_tokens=1)\n"
        "events.KvMemoryPoolEnd(avail_bytes=1)\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(probe)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert result.returncode == 1, result.stdout
    assert 'probe.py:2: error: Unexpected keyword argument "avail_gb"' in result.stdout
    assert 'probe.py:3: error: Argument "allocation_state"' in result.stdout
    assert "probe.py:4:" not in result.stdout
