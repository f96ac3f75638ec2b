"""``EventValidator`` as a library: every answer it gives, where each violation points, and in what order.

``kvlog validate``, ``emit()`` and the check rules all ask it; these cases pin each branch of its
answers (unknown names and versions, values the compiled engine cannot take, the re-pointed paths of
missing and unknown fields) so that a changed comparison or a dropped line shows.
"""

from __future__ import annotations

from typing import Any

import pytest
from foundation_samples import sample

from kvlog.io.jsonline import ExactInt
from kvlog.schema.event_validator import EventValidator, Violation

ALLOCATION = sample("kv_pool.allocation", 2)
UNKNOWN_FIELD = "unknown field (not in this event's schema; engine-specific fields go under ext)"


def test_a_valid_event_has_no_violations_and_is_valid(validator: EventValidator) -> None:
    assert validator.violations(ALLOCATION) == []
    assert validator.is_valid(ALLOCATION) is True
    assert validator.fast_check("kv_pool.allocation", 2)(ALLOCATION) is True


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        ([ALLOCATION], [Violation("$", "an event is a JSON object, not list")]),
        ("kv_pool.allocation", [Violation("$", "an event is a JSON object, not str")]),
        ({**ALLOCATION, "event": 5}, [Violation("$.event", "missing or not a string: every event needs a name")]),
        (
            {k: v for k, v in ALLOCATION.items() if k != "event"},
            [Violation("$.event", "missing or not a string: every event needs a name")],
        ),
        ({**ALLOCATION, "event": "kv_pool.alloc"}, [Violation("$.event", "unknown event 'kv_pool.alloc'")]),
        (
            {**ALLOCATION, "schema_version": 3},
            [Violation("$.schema_version", "unknown version 3 of kv_pool.allocation (known: 1, 2)")],
        ),
        (
            {**ALLOCATION, "schema_version": True},  # True == 1 in Python, but a JSON boolean is no version
            [Violation("$.schema_version", "unknown version true of kv_pool.allocation (known: 1, 2)")],
        ),
        (  # the message quotes the value as the line holds it, not as Python prints it
            {**ALLOCATION, "schema_version": None},
            [Violation("$.schema_version", "unknown version null of kv_pool.allocation (known: 1, 2)")],
        ),
        (
            {**ALLOCATION, "schema_version": "2"},
            [Violation("$.schema_version", 'unknown version "2" of kv_pool.allocation (known: 1, 2)')],
        ),
        (
            {k: v for k, v in ALLOCATION.items() if k != "schema_version"},
            [
                Violation(
                    "$.schema_version", "missing: every event names its version of kv_pool.allocation (known: 1, 2)"
                )
            ],
        ),
        (
            {**ALLOCATION, "schema_version": [2]},
            [Violation("$.schema_version", "unknown version [2] of kv_pool.allocation (known: 1, 2)")],
        ),
    ],
)
def test_what_is_not_a_catalog_event_gets_one_violation_saying_why(
    validator: EventValidator, event: Any, expected: list[Violation]
) -> None:
    assert validator.violations(event) == expected
    if isinstance(event, dict):  # is_valid takes a mapping
        assert validator.is_valid(event) is False


@pytest.mark.parametrize(
    ("name", "version"),
    [("kv_pool.alloc", 2), ("kv_pool.allocation", 3), ("kv_pool.allocation", True), (5, 2), (None, None)],
)
def test_the_fast_check_of_an_unknown_name_or_version_is_never_valid(
    validator: EventValidator, name: object, version: object
) -> None:
    assert validator.fast_check(name, version)({**ALLOCATION, "event": name, "schema_version": version}) is False


@pytest.mark.parametrize(("name", "version"), [(["kv_pool.allocation"], 2), ("kv_pool.allocation", [2])])
def test_an_unhashable_name_or_version_is_never_valid_and_does_not_raise(
    validator: EventValidator, name: object, version: object
) -> None:
    assert validator.fast_check(name, version)(ALLOCATION) is False


def test_the_fast_check_is_compiled_once_per_name_and_version() -> None:
    """Hot loops keep the checks by (name, version): asking again must hand back the same compiled check."""
    validator = EventValidator()
    first = validator.fast_check("kv_pool.allocation", 2)
    assert validator.fast_check("kv_pool.allocation", 2) is first
    assert validator.fast_check("kv_pool.allocation", 1) is not first


@pytest.mark.parametrize(("tokens", "valid"), [(ExactInt(5), True), (ExactInt(-1), False)])
def test_a_number_keeping_its_source_text_is_judged_by_the_reference_engine(
    validator: EventValidator, tokens: ExactInt, valid: bool
) -> None:
    """The compiled engine refuses an int subclass (``ValueError``); the answer must still be the right one."""
    event = {**ALLOCATION, "num_tokens": tokens}
    assert validator.is_valid(event) is valid
    expected = [] if valid else [Violation("$.num_tokens", "-1 is less than the minimum of 0")]
    assert validator.violations(event) == expected


def test_each_missing_field_is_reported_at_its_own_path(validator: EventValidator) -> None:
    event = {k: v for k, v in ALLOCATION.items() if k not in {"layout", "dtype"}}
    assert validator.violations(event) == [
        Violation("$.layout", "required field is missing"),
        Violation("$.dtype", "required field is missing"),
    ]


def test_a_missing_field_of_a_nested_object_is_reported_under_that_object(validator: EventValidator) -> None:
    event = {**ALLOCATION, "migrated": {}}
    assert Violation("$.migrated.source_format", "required field is missing") in validator.violations(event)


def test_each_unknown_field_is_reported_at_its_own_path_and_known_ones_are_not(validator: EventValidator) -> None:
    event = {**ALLOCATION, "zz": 1, "aa": 2}
    assert validator.violations(event) == [Violation("$.zz", UNKNOWN_FIELD), Violation("$.aa", UNKNOWN_FIELD)]


def test_violations_come_in_the_order_of_their_paths_not_of_the_schema(validator: EventValidator) -> None:
    """The schema lists num_tokens before k_bytes; a reader gets them sorted by where they are."""
    event = {**ALLOCATION, "num_tokens": "x", "k_bytes": "y", "ranks": {"tp": "z"}, "zz": 1}
    assert validator.violations(event) == [
        Violation("$.zz", UNKNOWN_FIELD),
        Violation("$.k_bytes", "'y' is not of type 'integer'"),
        Violation("$.num_tokens", "'x' is not of type 'integer', 'null'"),
        Violation("$.ranks.tp", "'z' is not of type 'integer'"),
    ]


def test_an_object_where_a_string_is_due_is_a_type_error_not_unknown_fields(validator: EventValidator) -> None:
    """Only ``additionalProperties`` errors are re-pointed at each field; an object given a type error is not."""
    assert validator.violations({**ALLOCATION, "dtype": {"a": 1}}) == [
        Violation("$.dtype", "{'a': 1} is not of type 'string', 'null'")
    ]
