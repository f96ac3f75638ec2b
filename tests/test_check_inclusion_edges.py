"""``kvlog.check.inclusion.Judge`` on the edges the compare table does not reach, asked directly.

Each case is a pair of 2020-12 schemas and what a user of ``kvlog check`` relies on: the verdict, where
it is located, why, and an instance that shows a break (accepted by the writer, rejected by the reader,
checked here with the reference validator rather than trusted).
"""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from kvlog.check.inclusion import Judge, Outcome

I: dict[str, Any] = {"type": "integer"}  # noqa: E741
S: dict[str, Any] = {"type": "string"}


def judged(writer: Any, reader: Any) -> Outcome:
    return Judge().includes(writer, reader)


def assert_breaks(outcome: Outcome, writer: Any, reader: Any, where: str, message: str) -> Any:
    """A "no" located at ``where`` saying ``message``, with an instance of the writer the reader rejects."""
    assert outcome.holds is False, outcome
    assert [(reason.path, reason.message) for reason in outcome.reasons] == [(where, message)]
    assert outcome.witness is not None
    value = outcome.witness.value
    assert Draft202012Validator(writer).is_valid(value), value
    assert not Draft202012Validator(reader).is_valid(value), value
    return value


def test_a_break_at_a_tuple_position_past_every_sample_array_is_shown_in_an_array_padded_to_reach_it() -> None:
    """The writer's sample arrays hold at most two items; the break is at the fourth: the rest are filled in."""
    writer = {"type": "array", "items": I}
    reader = {"type": "array", "prefixItems": [I, I, I, {"type": "integer", "maximum": 5}]}
    value = assert_breaks(
        judged(writer, reader), writer, reader, "$[3]", "upper bound lowered from none (old) to <= 5 (new)"
    )
    assert len(value) == 4 and value[3] > 5


@pytest.mark.parametrize("group", ["anyOf", "oneOf", "not", "if"])
def test_applicators_beside_unevaluated_properties_stay_with_the_reader_they_shape(group: str) -> None:
    """unevaluatedProperties sees what the applicators evaluated, so they are not split off as parts: the
    reader keeps them and the writer's empty object, which none of them accepts, is the instance shown."""
    needs_a = {"required": ["a"]}
    applicator = {
        "anyOf": {"anyOf": [needs_a]},
        "oneOf": {"oneOf": [needs_a]},
        "not": {"not": {"maxProperties": 0}},
        "if": {"if": True, "then": needs_a},
    }[group]
    writer = {"type": "object"}
    reader = {"type": "object", **applicator, "unevaluatedProperties": {}}
    value = assert_breaks(
        judged(writer, reader), writer, reader, "$", "the new schema mixes applicators with unevaluated keywords"
    )
    assert value == {}
