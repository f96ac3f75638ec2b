"""``kvlog.check.inclusion.Judge`` on the edges the compare table does not reach, asked directly.

Each case is a pair of 2020-12 schemas and what a user of ``kvlog check`` relies on: the verdict, where
it is located, why, and an instance that shows a break (accepted by the writer, rejected by the reader,
checked here with the reference validator rather than trusted).
"""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from kvlog.check.inclusion import Inclusion, Judge
from kvlog.check.inclusion.algebra import merge
from kvlog.check.instances import candidates

I: dict[str, Any] = {"type": "integer"}  # noqa: E741
S: dict[str, Any] = {"type": "string"}


def judged(writer: Any, reader: Any) -> Inclusion:
    return Judge().includes(writer, reader)


def assert_breaks(outcome: Inclusion, writer: Any, reader: Any, where: str, message: str) -> Any:
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


def assert_sound(outcome: Inclusion, writer: Any, reader: Any) -> None:
    """Whatever the verdict, a "no" carries an instance the writer accepts and the reader rejects."""
    if outcome.holds is False:
        assert outcome.witness is not None, outcome
        assert Draft202012Validator(writer).is_valid(outcome.witness.value), outcome
        assert not Draft202012Validator(reader).is_valid(outcome.witness.value), outcome


@pytest.mark.parametrize(
    ("writer", "reader"),
    [
        (  # a member the writer's patternProperties forbid, whatever its properties say
            {"type": "object", "properties": {"ab": I}, "patternProperties": {"^a": False}},
            {"type": "object", "properties": {"ab": S}},
        ),
        ({"type": "string", "anyOf": [{"minLength": 1}, False]}, S),  # a false branch adds no instance
        ({"type": "array", "items": S, "anyOf": [{"maxItems": 2}, False]}, {"type": "array", "items": S}),
    ],
)
def test_what_the_writer_rules_out_with_false_is_never_asked_of_the_reader(writer: Any, reader: Any) -> None:
    assert judged(writer, reader) == Inclusion(True)


@pytest.mark.parametrize(
    ("writer", "reader"),
    [
        ({"type": "string", "pattern": "^a", "anyOf": [{"pattern": "b$"}]}, {"type": "string", "maxLength": 5}),
        ({"type": "string", "pattern": "^a", "anyOf": [{"pattern": "b$"}]}, {"type": "string", "pattern": "^a+$"}),
        ({"type": "integer", "multipleOf": 2, "anyOf": [{"multipleOf": 3}]}, {"type": "integer", "maximum": 10}),
        ({"type": "integer", "multipleOf": 2, "anyOf": [{"multipleOf": 3}]}, {"type": "integer", "multipleOf": 4}),
        ({"type": "string", "format": "date", "anyOf": [{"format": "email"}]}, {"type": "string", "maxLength": 3}),
    ],
)
def test_a_writer_branch_that_meets_a_second_value_of_a_keyword_keeps_both(writer: Any, reader: Any) -> None:
    """Two patterns or steps cannot fold into one: the branch keeps the second in allOf, so no instance of
    the first alone is ever shown as the writer's."""
    assert_sound(judged(writer, reader), writer, reader)


# -- merge: the conjunction of two schemas -------------------------------------------------------------------

NUMBERS = {"type": "number"}
#: one or more pairs per rule of merge: each side's keyword kept, folded, or put beside in allOf
MERGED_PAIRS: list[tuple[str, Any, Any]] = [
    ("false on the right", {"type": "string", "minLength": 1}, False),
    ("false on the left", False, {"type": "string"}),
    ("true on the left", True, {"type": "integer", "minimum": 1}),
    ("true on the right", {"type": "integer", "minimum": 1}, True),
    ("true on both sides", True, True),
    ("an empty schema", {"type": "integer", "maximum": 2}, {}),
    ("the same keyword twice", {"type": "string", "maxLength": 2}, {"type": "string", "maxLength": 2}),
    ("disjoint keywords", {"type": "string"}, {"minLength": 2}),
    ("types narrowed", {"type": ["string", "integer", "null"]}, {"type": ["number", "null"]}),
    ("integer inside number", NUMBERS, {"type": "integer"}),
    ("number beside integer", {"type": ["integer", "string"]}, {"type": ["number", "boolean"]}),
    ("no type left", {"type": "string"}, {"type": "integer"}),
    ("lower bounds", {"minimum": 1, "exclusiveMinimum": 0, "minLength": 1}, {"minimum": 3, "exclusiveMinimum": 2}),
    ("upper bounds", {"maximum": 9, "maxLength": 4, "maxItems": 3}, {"maximum": 5, "maxLength": 2, "maxItems": 1}),
    ("counts", {"minItems": 1, "minProperties": 2, "maxProperties": 3}, {"minItems": 2, "minProperties": 1}),
    ("required", {"required": ["a"]}, {"required": ["b", "a"]}),
    ("enum", {"enum": [1, 2, "x", None]}, {"enum": [2, "x", 3]}),
    ("uniqueItems", {"type": "array", "uniqueItems": False}, {"type": "array", "uniqueItems": True}),
    ("properties", {"properties": {"a": {"type": "integer"}}}, {"properties": {"a": {"minimum": 2}, "b": S}}),
    ("patternProperties", {"patternProperties": {"^x": S}}, {"patternProperties": {"^x": {"maxLength": 1}}}),
    ("dependentRequired", {"dependentRequired": {"a": ["b"]}}, {"dependentRequired": {"a": ["c"], "d": ["a"]}}),
    (
        "dependentSchemas",
        {"dependentSchemas": {"a": {"required": ["b"]}}},
        {"dependentSchemas": {"a": {"maxProperties": 2}}},
    ),
    ("allOf", {"allOf": [{"minimum": 1}]}, {"allOf": [{"maximum": 3}]}),
    ("not", {"not": {"type": "string"}}, {"not": {"type": "null"}}),
    ("two patterns", {"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "b$"}),
    ("two steps", {"type": "integer", "multipleOf": 2}, {"type": "integer", "multipleOf": 3}),
    ("two consts", {"const": 1}, {"const": 2}),
    ("closed beside properties", {"properties": {"a": I}, "additionalProperties": False}, {"properties": {"b": I}}),
    ("open member schemas", {"properties": {"a": I}, "additionalProperties": S}, {"additionalProperties": S}),
    ("items beside a tuple", {"prefixItems": [I], "items": False}, {"items": I}),
    ("if/then on both", {"if": {"type": "integer"}, "then": {"minimum": 1}}, {"if": S, "then": {"minLength": 1}}),
    ("if/then on one side", {"if": {"type": "integer"}, "then": {"minimum": 1}}, {"maximum": 5}),
    ("if/then on the other side", {"maximum": 5}, {"if": {"type": "integer"}, "then": {"minimum": 1}}),
    ("closed beside more keywords", {"properties": {"a": I}}, {"additionalProperties": False, "minProperties": 1}),
    ("one contains, two counts", {"contains": I, "minContains": 2}, {"contains": I, "maxContains": 3}),
    ("one contains, default counts", {"contains": I, "maxContains": 2}, {"contains": I, "minContains": 2}),
    ("two contains", {"contains": I}, {"contains": S}),
]
VALUES: list[Any] = [
    None, True, False, 0, 1, 2, 3, 4, 5, 6, 9, 10, 1.5, -1, "", "a", "ab", "ba", "abc", "x", "aab", [], [1],
    [1, 1], [1, 2], [1, "a"], ["a", "b", "c"], [1, 2, 3, 4], [0, 0, 0], {}, {"a": 1}, {"a": 2, "b": "x"},
    {"a": 1, "b": 1}, {"b": 1}, {"a": 1, "c": 1}, {"a": 3, "d": 1}, {"x": "s"}, {"x": "st"}, {"xy": 1},
    {"a": 1, "b": 1, "c": 1}, {"a": 5, "b": "", "c": 1, "d": 1},
]  # fmt: skip


@pytest.mark.parametrize(("left", "right"), [pair[1:] for pair in MERGED_PAIRS], ids=[pair[0] for pair in MERGED_PAIRS])
def test_merging_two_schemas_accepts_exactly_what_both_accept(left: Any, right: Any) -> None:
    """Every rule of ``merge`` (a keyword folded, kept, or set beside in allOf) keeps the conjunction exact."""
    merged = merge(left, right)
    for value in [*VALUES, *candidates(left), *candidates(right)]:
        both = Draft202012Validator(left).is_valid(value) and Draft202012Validator(right).is_valid(value)
        if merged is True:
            assert both, value
        elif merged is False or merged.get("type") == ["__none__"]:  # nothing is both (an unknown type, for kvlog)
            assert not both, value
        else:
            assert Draft202012Validator(merged).is_valid(value) == both, (value, merged)


# -- rules of the typed keywords -------------------------------------------------------------------------------

CLOSED_AB = {"type": "object", "properties": {"a": I, "b": I}, "additionalProperties": False}


def test_a_closed_writer_lacks_a_member_unless_its_minimum_count_needs_every_other_member_and_it() -> None:
    required_a = {"type": "object", "required": ["a"]}
    assert judged({**CLOSED_AB, "minProperties": 2}, required_a) == Inclusion(True)
    writer = {**CLOSED_AB, "minProperties": 1}
    value = assert_breaks(judged(writer, required_a), writer, required_a, "$.a", "new requires a; old may lack it")
    assert value == {"b": 0}


@pytest.mark.parametrize(
    ("bounds", "verdict"),
    [
        ({"minimum": 5, "exclusiveMinimum": 3}, "as minimum 5"),  # the larger bound holds, whichever kind
        ({"minimum": 3, "exclusiveMinimum": 5}, "as above 5"),
        ({"exclusiveMinimum": 3, "minimum": 5}, "as minimum 5"),
        ({"minimum": 4, "exclusiveMinimum": 4}, "as above 4"),  # at one value the exclusive bound holds
    ],
)
def test_the_tighter_of_minimum_and_exclusive_minimum_is_the_lower_bound(bounds: dict[str, int], verdict: str) -> None:
    schema = {"type": "number", **bounds}
    same_bound = {
        "as minimum 5": {"minimum": 5},
        "as above 5": {"exclusiveMinimum": 5},
        "as above 4": {"exclusiveMinimum": 4},
    }
    plain = {"type": "number", **same_bound[verdict]}
    assert judged(schema, plain) == Inclusion(True)
    assert judged(plain, schema) == Inclusion(True)
    below = {"type": "number", "minimum": 4}
    assert_breaks(judged(below, schema), below, schema, "$", judged(below, schema).reasons[0].message)


def test_number_ranges_that_meet_at_an_exclusive_top_cover_a_writer_open_at_that_top() -> None:
    writer = {"type": "number", "minimum": 0, "exclusiveMaximum": 2}
    halves = [{"type": "number", "minimum": 0, "maximum": 1}, {"type": "number", "exclusiveMinimum": 1, "maximum": 2}]
    assert judged(writer, {"anyOf": halves}) == Inclusion(True)
    closed_top = {"type": "number", "minimum": 0, "maximum": 2}
    open_halves = [halves[0], {**halves[1], "exclusiveMaximum": 2}]
    value = assert_breaks(
        judged(closed_top, {"anyOf": open_halves}),
        closed_top,
        {"anyOf": open_halves},
        "$",
        "the anyOf branches of new leave out values old has",
    )
    assert value == 2


def test_every_integer_is_a_multiple_of_one_over_n_and_not_of_other_fractions() -> None:
    assert judged(I, {"type": "number", "multipleOf": 0.25}) == Inclusion(True)
    reader = {"type": "number", "multipleOf": 0.4}
    assert_breaks(judged(I, reader), I, reader, "$", "new requires multiples of 0.4")


def test_an_allof_of_true_alone_is_any_value() -> None:
    writer = {"allOf": [True]}
    value = assert_breaks(judged(writer, S), writer, S, "$", "new rejects null, which old allows")
    assert value is None


def test_the_then_branch_of_a_split_writer_is_split_again() -> None:
    """anyOf, then if/then, then the then-branch's anyOf: three splits, each branch compared on its own."""
    writer = {
        "type": "number",
        "anyOf": [{"type": "number"}],
        "if": {"minimum": 0},
        "then": {"anyOf": [{"maximum": 10}, {"minimum": 20}]},
        "else": {"maximum": -1},
    }
    assert judged(writer, {"type": "number", "anyOf": [{"maximum": 10}, {"minimum": 20}]}) == Inclusion(True)


@pytest.mark.parametrize("lengths", [{"maxLength": 1000}, {"minLength": 1000}, {"minLength": 100, "maxLength": 200}])
def test_a_pattern_inside_another_is_proven_also_beyond_the_lengths_kvlog_unrolls(lengths: dict[str, int]) -> None:
    """Lengths past what kvlog spells out as a language are compared apart from the patterns."""
    writer = {"type": "string", "pattern": "^ab", **lengths}
    assert judged(writer, {"type": "string", "pattern": "^a"}) == Inclusion(True)
    assert judged(writer, {"type": "string", "pattern": "^a", **lengths}) == Inclusion(True)


def test_anyof_branches_with_other_keywords_than_lengths_are_never_joined_by_their_lengths_alone() -> None:
    """Lengths [0, 3] and [4, inf) cover every string, but the second branch also wants one value."""
    reader = {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "string", "minLength": 4, "enum": ["abcd"]}]}
    value = assert_breaks(judged(S, reader), S, reader, "$", "no single anyOf branch of new covers old")
    assert len(value) >= 4 and value != "abcd"


def nested(levels: int, leaf: Any) -> Any:
    """``leaf`` as member ``a`` of a required member ``a`` ... ``levels`` objects deep."""
    schema = leaf
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


def test_schemas_are_compared_24_objects_deep_and_deeper_is_said_undecided() -> None:
    bounded = {"type": "integer", "maximum": 5}
    writer, reader = nested(24, I), nested(24, bounded)
    value = assert_breaks(
        judged(writer, reader), writer, reader, "$" + ".a" * 24, "upper bound lowered from none (old) to <= 5 (new)"
    )
    for _ in range(24):
        value = value["a"]
    assert value == 6
    deeper = judged(nested(25, I), nested(25, bounded))
    assert deeper.holds is None
    assert any("the schemas nest deeper than kvlog compares" in reason.message for reason in deeper.reasons)


def test_a_member_break_is_shown_in_an_object_even_when_the_writer_also_allows_other_types_first() -> None:
    writer = {"type": ["string", "object"], "properties": {"a": I}}
    reader = {"type": ["string", "object"], "properties": {"a": {"type": "integer", "maximum": 5}}}
    value = assert_breaks(
        judged(writer, reader), writer, reader, "$.a", "upper bound lowered from none (old) to <= 5 (new)"
    )
    assert value == {"a": 6}


def test_number_ranges_covered_by_a_later_branch_after_a_smaller_one_inside_an_earlier() -> None:
    """[0, 10], then [1, 3] (inside it), then [9, 12]: together they cover [0, 12]."""
    spans = [(0, 10), (1, 3), (9, 12)]
    reader = {"anyOf": [{"type": "number", "minimum": low, "maximum": high} for low, high in spans]}
    assert judged({"type": "number", "minimum": 0, "maximum": 12}, reader) == Inclusion(True)


def test_a_member_the_writer_may_add_is_shown_under_a_name_its_property_names_allow() -> None:
    writer = {"type": "object", "propertyNames": {"pattern": "^x"}}
    reader = {"type": "object", "additionalProperties": I}
    value = assert_breaks(judged(writer, reader), writer, reader, "$.*", "new rejects null, which old allows")
    assert list(value) == ["x"]


@pytest.mark.parametrize("reader_pattern", [{"pattern": "^a"}, {}], ids=["same pattern", "no pattern"])
def test_a_length_change_alone_is_told_as_a_length_change(reader_pattern: dict[str, str]) -> None:
    writer = {"type": "string", "pattern": "^a", "maxLength": 5}
    reader = {"type": "string", **reader_pattern, "maxLength": 3}
    assert_breaks(judged(writer, reader), writer, reader, "$", "length [0, 5] (old) is not inside [0, 3]")


def test_anyof_branches_that_use_every_string_keyword_are_joined() -> None:
    one_char = {"type": "string", "minLength": 1, "maxLength": 1}
    reader = {"anyOf": [{**one_char, "pattern": "^a"}, {**one_char, "pattern": "^b"}]}
    assert judged({"type": "string", "pattern": "^[ab]$"}, reader) == Inclusion(True)


@pytest.mark.parametrize(
    ("bounds", "plain"),
    [
        ({"maximum": 3, "exclusiveMaximum": 5}, {"maximum": 3}),  # the smaller bound holds, whichever kind
        ({"exclusiveMaximum": 3, "maximum": 5}, {"exclusiveMaximum": 3}),
        ({"maximum": 4, "exclusiveMaximum": 4}, {"exclusiveMaximum": 4}),  # at one value the exclusive bound holds
    ],
)
def test_the_tighter_of_maximum_and_exclusive_maximum_is_the_upper_bound(
    bounds: dict[str, int], plain: dict[str, int]
) -> None:
    schema, same_bound = {"type": "number", **bounds}, {"type": "number", **plain}
    assert judged(schema, same_bound) == Inclusion(True)
    assert judged(same_bound, schema) == Inclusion(True)


def test_a_oneof_branch_unbounded_above_is_disjoint_from_one_wholly_below_the_writer() -> None:
    """The writer, 1 and up, is inside the first branch and clear of the second ([-5, 0]): one branch matches."""
    reader = {"oneOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "number", "minimum": -5, "maximum": 0}]}
    assert judged({"type": "number", "minimum": 1}, reader) == Inclusion(True)
