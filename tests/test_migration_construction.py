"""Validation by construction: an event built from a text rule is written as the reference path writes it.

By default ``kvlog migrate`` validates an event it built from a wording only when no event of that rule
with the same keys was valid before (``FileRun._record``): each rule captures its values as its schema
types them, so what can make one invalid is which keys it has. This is the proof, by property: for every
text rule of every server, messages drawn from the rule's own expression (every message it reads, as
hypothesis finds them), under the server's printed prefix or a record's header, after other rules'
lines on the same ranks (the context's revisions), migrated to every catalog version there is: every
event the default path writes validates, and it writes what the reference (``validate_all``: every
event built through its steps and validated) writes, dead letters and report included. A rule that
builds an invalid event (``KV Cache awake`` without its arenas is one, refused as the reference refuses
it) is caught by the keys; one whose values could be invalid would fail here.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from migration_helpers import Taken, shipped_chain

from kvlog.migration.engine import FileRun, MigrateOptions, Migrator
from kvlog.migration.grammar import Rule
from kvlog.migration.report import MigrationReport
from kvlog.text.prefix import SERVERS, LinePrefix

CHAIN = shipped_chain()
#: every rule that builds an event, with its server
RULES: list[tuple[str, Rule]] = [
    (generation.server, rule)
    for generation in CHAIN.generations()
    for rule in generation.rules
    if rule.version is not None and rule.role is None
]
TOP = CHAIN.catalog.newest_release()
VALIDATOR = Migrator(CHAIN, MigrateOptions()).validator

timestamps = st.builds(
    "{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}Z".format,
    st.integers(1970, 2100),
    st.integers(1, 12),
    st.integers(1, 28),
    st.integers(0, 23),
    st.integers(0, 59),
    st.integers(0, 59),
)
ranks = st.dictionaries(st.sampled_from(["tp", "dp", "pp", "ep", "attn_cp"]), st.integers(0, 999_999), max_size=3)


def message_of(rule: Rule) -> st.SearchStrategy[str]:
    """Every message ``rule`` reads: its own expression, drawn whole (one line: no line break in it)."""
    return st.from_regex(rule.parser.pattern, fullmatch=True).filter(lambda text: "\n" not in text)


def header(message: str) -> st.SearchStrategy[LinePrefix]:
    return st.builds(
        LinePrefix,
        timestamp=st.one_of(st.none(), timestamps),
        ranks=ranks,
        level=st.one_of(st.none(), st.sampled_from(["debug", "info", "warning", "error", "critical"])),
        message=st.just(message),
        pid=st.one_of(st.none(), st.integers(0, 2**31)),
        exact=st.booleans(),
    )


def others() -> st.SearchStrategy[list[str]]:
    """Other rules' messages before it, on the same ranks: the context revises what follows them."""
    return st.lists(st.sampled_from(range(len(RULES))).flatmap(lambda i: message_of(RULES[i][1])), max_size=2)


@functools.cache
def migrator(options: MigrateOptions) -> Migrator:
    """One migrator per options, kept across examples: what it proved valid for one line stands for the next."""
    return Migrator(CHAIN, options)


def run(options: MigrateOptions, server: str, heads: list[LinePrefix], printed: bool) -> tuple[Any, ...]:
    """What the engine gives for the messages: records, bytes passed through, dead letters, report."""
    taken, dead = Taken(), []  # type: ignore[var-annotated]
    report = MigrationReport(files=1)
    file_run = FileRun(migrator(options), "prove.log", report, dead.append, taken)
    if printed:  # the server's own prefix before each message, read back as a printed line is
        lines = [SERVERS[server].build(head.timestamp, head.ranks) + head.message for head in heads]
        file_run.feed("".join(f"{line}\n" for line in lines).encode("utf-8", "backslashreplace"))
    else:
        file_run.messages(heads)
    file_run.finish()
    records = [(r.event, list(r.event), r.line, r.raw, r.source_format, r.glue) for r in taken.records]
    return records, taken.passed.getvalue(), dead, report


@pytest.mark.parametrize(
    ("server", "rule"),
    RULES,
    ids=[f"{server}:{rule.template.event}:{rule.template.text[:40]}" for server, rule in RULES],
)
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_every_event_a_rule_builds_validates_and_is_the_references(server: str, rule: Rule, data: Any) -> None:
    messages = [*data.draw(others()), data.draw(message_of(rule))]
    printed = data.draw(st.booleans())
    heads = [data.draw(header(message)) for message in messages]
    to = data.draw(st.sampled_from(range(1, TOP + 1)))
    usage = data.draw(st.sampled_from(["none", "all"]))
    fast = run(MigrateOptions(to_catalog=to, usage=usage), server, heads, printed)
    for event, *_ in fast[0]:
        assert VALIDATOR.is_valid(event), (event, VALIDATOR.violations(event)[:3])
    assert fast == run(MigrateOptions(to_catalog=to, usage=usage, validate_all=True), server, heads, printed)
