"""The keyword table of ``kvlog.check.inclusion``: every keyword the verdict reads has one rule, found there.

The verdict reads every draft into the 2020-12 keywords (``kvlog.check.drafts``); a keyword those
hold that no rule reads would be ignored in the new schema, and a narrowing called compatible. These
tests pin the table to the drafts' vocabulary, each rule module to the table, and what a keyword
outside the table gives.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from kvlog.check import compare
from kvlog.check.inclusion import Judge, applicators, arrays, objects, scalars
from kvlog.check.inclusion.keywords import APPLICATORS, KEYWORDS, TYPES, reference, typed
from kvlog.schema import walk

S: dict[str, Any] = {"type": "string"}


def test_the_table_has_a_rule_for_each_keyword_the_drafts_are_read_into_and_no_other() -> None:
    assert set(KEYWORDS) == set(walk.KEYWORDS["2020-12"])


def test_each_applicator_keyword_is_judged_by_its_applicator_rule_and_each_type_by_its_own() -> None:
    assert {key for key, rule in KEYWORDS.items() if rule in APPLICATORS.values()} == {
        *("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas")
    }
    assert set(TYPES) == {"integer", "number", "string", "array", "object"}  # null, boolean: their values are listed


def test_every_rule_of_the_table_runs_for_a_part_or_a_type() -> None:
    """A rule the table names but no dispatch reaches would judge nothing."""
    reached = {*APPLICATORS.values(), *TYPES.values(), *arrays.RULES, *objects.RULES, typed, reference}
    assert set(KEYWORDS.values()) <= reached


@pytest.mark.parametrize("module", [applicators, scalars, arrays, objects])
def test_a_rule_module_holds_rules_the_table_names_and_their_helpers_only(module: object) -> None:
    public = {
        name
        for name, function in inspect.getmembers(module, inspect.isfunction)
        if not name.startswith("_") and function.__module__ == module.__name__  # type: ignore[attr-defined]
    }
    named = {rule.__name__ for rule in (*KEYWORDS.values(), *TYPES.values())}
    assert public - named <= {"values"}  # values: a writer of few values, asked before any keyword's rule


def test_a_reader_keyword_without_a_rule_is_undecided_and_named_never_ignored() -> None:
    outcome = Judge().includes(S, {**S, "frobnicate": 3})
    assert outcome.holds is None
    assert [str(reason) for reason in outcome.reasons] == [
        "$: kvlog has no rule for the keyword 'frobnicate': kvlog cannot prove it safe"
    ]


def test_a_keyword_no_draft_defines_is_an_annotation_as_the_validators_read_it() -> None:
    new = {**S, "frobnicate": 3, "maxLength": 2}
    assert Draft202012Validator(new).is_valid("abc") is False  # maxLength still counts; frobnicate does not
    verdict = compare({**S, "maxLength": 2}, new)
    assert verdict.compatible is True


def test_a_reference_left_after_reading_is_undecided() -> None:
    outcome = Judge().includes(S, {"$ref": "other.json"})
    assert outcome.holds is None
    assert [str(reason) for reason in outcome.reasons] == [
        "$: a reference kvlog does not follow (recursive, dynamic or to another document): kvlog cannot prove it safe"
    ]
