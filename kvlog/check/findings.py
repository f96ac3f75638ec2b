"""What ``kvlog check`` reports: findings with stable rule ids, so CI logs, suppressions and docs can name them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning", "note"]


@dataclass(frozen=True)
class Rule:
    """One check: its id never changes once released, its level says whether it fails the build."""

    id: str
    name: str
    level: Severity
    summary: str


RULES: dict[str, Rule] = {
    rule.id: rule
    for rule in [
        Rule("KV001", "schema-unreadable", "error", "a schema file is valid JSON holding an object with a string $id"),
        Rule(
            "KV002",
            "metaschema",
            "error",
            "every schema declares its draft (4, 6, 7, 2019-09, 2020-12) and is valid in it",
        ),
        Rule("KV003", "ref-unresolved", "error", "every $ref resolves inside the catalog"),
        Rule("KV004", "id-mismatch", "error", "$id agrees with the file's place in the catalog"),
        Rule("KV005", "version-mismatch", "error", "the event and schema_version constants agree with the file name"),
        Rule("KV006", "version-gap", "error", "the versions of an event are 1, 2, ... with none missing"),
        Rule("KV007", "stray-file", "error", "the catalog holds only <event>/v<N>.json and shared _<name>.json files"),
        Rule(
            "KV008",
            "pattern-backtracks",
            "error",
            "every pattern matches in linear time: no loop in a loop or overlapping alternatives under one",
        ),
        Rule("KV101", "bytes-type", "error", "fields named *_bytes are non-negative integers (or null)"),
        Rule("KV102", "unit-suffix", "error", "sizes are bytes: no _gb, _gib, _mb, _kib ... fields"),
        Rule("KV103", "bytes-name", "error", "fields typed as byte counts are named *_bytes"),
        Rule("KV104", "state-enum", "warning", "state, status, kind and mode fields declare their values as an enum"),
        Rule("KV201", "released-edited", "error", "a version released at the compared git ref is never changed"),
        Rule("KV202", "released-reworded", "warning", "a released version's annotations (descriptions) changed"),
        Rule("KV203", "released-removed", "error", "a version released at the compared git ref is never removed"),
        Rule("KV204", "incompatible", "error", "a new version is compatible with its predecessors under the mode"),
        Rule("KV205", "covered-by-migration", "note", "an incompatible new version is covered by a migration"),
        Rule("KV301", "migrations-unloadable", "error", "every migration file loads"),
        Rule("KV302", "chain-incomplete", "error", "every older version of an event migrates to the latest"),
        Rule("KV304", "text-format-incomplete", "error", "every legacy text format migrates to latest versions"),
        Rule("KV401", "example-mismatch", "error", "each migration's declared examples upgrade to what they say"),
        Rule("KV402", "round-trip", "error", "invertible migrations give back their input when inverted"),
        Rule("KV403", "example-invalid", "error", "examples are valid events of the versions they claim"),
        Rule("KV501", "corpus-unparsed", "error", "golden corpus logs migrate with no new unparsed memory lines"),
        Rule("KV502", "corpus-invalid", "error", "events migrated from golden corpus logs are valid"),
        Rule("KV503", "corpus-unreadable", "error", "golden corpus files can be read and migrated"),
    ]
}


@dataclass(frozen=True)
class Finding:
    """One problem (or, at level note, one noteworthy pass), located in a file where it has one."""

    rule: str
    message: str
    file: str | None = None
    line: int | None = None
    # KV204/KV205: the event that breaks, as JSON text (the message quotes it too)
    counterexample: str | None = None

    @property
    def level(self) -> Severity:
        """The rule's level: findings of one rule always weigh the same."""
        return RULES[self.rule].level


def count_errors(findings: list[Finding]) -> int:
    """How many findings fail the check."""
    return sum(1 for finding in findings if finding.level == "error")
