"""Measure kvlog's JSON-Schema compatibility checker against two schema registries' published suites.

Each pair in ``--pairs`` (default ``~/.cache/kvlog-peers/pairs.json``) is built by
``benchmarks/peer_pairs.py`` from Confluent Schema Registry's and Karapace's own tests, fetched by
hand, never committed: confluentinc/schema-registry's
``json-schema-provider/src/test/resources/diff-*.json`` and Aiven-Open/karapace's
``tests/unit/compatibility/jsonschema/test_*compatibility.py`` with
``tests/schemas/json_schemas.py``. Each asks one directed question: is every instance valid under
``writer`` also valid under ``reader``? The harness does not trust either the peer or kvlog for the
answer. It searches for a witness, an instance the writer accepts and the reader rejects (each
judged by ``jsonschema`` with the validator of the schema's own draft, formats not asserted), from
three sources: ``hypothesis-jsonschema`` examples of the writer, a structural generator of boundary
values built from both schemas, and kvlog's own counterexample. A witness makes the pair
incompatible; none makes it compatible (as far as the search can tell).

kvlog is then scored against that truth: right, wrong, undecided, unsafe (says compatible while a
witness exists), exceptions, and bad counterexamples (a False verdict whose instance is not accepted
by the writer and rejected by the reader). The peer's own verdict is scored the same way.

    python benchmarks/peer_compat.py [--pairs PATH] [--show wrong|unsafe|undecided|peer-wrong|all]
                                     [--json OUT] [--examples 300] [--deadline 5] [--suite NAME]
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import resource
import signal
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from jsonschema.validators import (
    Draft4Validator,
    Draft6Validator,
    Draft7Validator,
    Draft201909Validator,
    Draft202012Validator,
    validator_for,
)

DEFAULT_PAIRS = Path("~/.cache/kvlog-peers/pairs.json").expanduser()
SHOW_CHOICES = ("wrong", "unsafe", "undecided", "peer-wrong", "all")
_MISSING = object()


# --------------------------------------------------------------------------------------------
# Validation by the schema's own draft


_BY_DRAFT = {
    "draft-04": Draft4Validator,
    "draft-06": Draft6Validator,
    "draft-07": Draft7Validator,
    "2019-09": Draft201909Validator,
    "2020-12": Draft202012Validator,
}


class _Validators:
    """One compiled validator per schema and draft (``$schema`` wins over the pair's draft), formats not asserted."""

    def __init__(self, default: str = "2020-12") -> None:
        self._cache: dict[str, Any] = {}
        self.draft = default

    def get(self, schema: Any) -> Any:
        key = self.draft + json.dumps(schema, sort_keys=True)
        found = self._cache.get(key)
        if found is None:
            cls = validator_for(schema, default=_BY_DRAFT[self.draft])
            found = cls(schema)  # no format_checker: formats are annotations only
            self._cache[key] = found
        return found

    def accepts(self, schema: Any, instance: Any) -> bool:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return bool(self.get(schema).is_valid(instance))


def breaks(validators: _Validators, writer: Any, reader: Any, instance: Any) -> bool:
    """Whether ``instance`` is a witness: valid under ``writer`` and invalid under ``reader``."""
    try:
        return validators.accepts(writer, instance) and not validators.accepts(reader, instance)
    except Exception:  # noqa: BLE001 - a value the validator cannot judge is no witness
        return False


# --------------------------------------------------------------------------------------------
# Structural candidates

_SCALARS: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    1,
    2,
    0.5,
    -0.5,
    1.5,
    10**20,
    -(10**20),
    1e300,
    "",
    "a",
    "A",
    "aa",
    "b",
    "0",
    "null",
    "x" * 100,
    [],
    [None],
    {},
]
_NUMERIC_KEYS = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
)


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    """Every object (subschema or not) inside a schema document."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _collect(schemas: list[Any]) -> tuple[list[Any], list[str], list[int]]:
    """Literal values, property names and array lengths that the schemas mention."""
    values: list[Any] = []
    names: list[str] = []
    lengths: set[int] = {0, 1, 2, 3}
    for schema in schemas:
        for node in _walk(schema):
            for key in ("enum", "examples"):
                if isinstance(node.get(key), list):
                    values.extend(node[key])
            for key in ("const", "default"):
                if key in node:
                    values.append(node[key])
            for key in ("properties", "dependencies", "dependentRequired", "dependentSchemas"):
                if isinstance(node.get(key), dict):
                    names.extend(str(name) for name in node[key])
            for key in ("required",):
                if isinstance(node.get(key), list):
                    names.extend(str(name) for name in node[key] if isinstance(name, str))
            if isinstance(node.get("patternProperties"), dict):
                for pattern in node["patternProperties"]:
                    names.append(str(pattern).lstrip("^").rstrip("$").replace("*", "").replace("+", "") or "a")
            for key in ("items", "prefixItems"):
                if isinstance(node.get(key), list):
                    lengths.update({len(node[key]), len(node[key]) + 1})
            for key in _NUMERIC_KEYS:
                bound = node.get(key)
                if isinstance(bound, (int, float)) and not isinstance(bound, bool) and math.isfinite(bound):
                    values.extend(_around(bound))
                    if key.endswith("Length"):
                        size = int(bound)
                        values.extend("a" * n for n in (max(size - 1, 0), size, size + 1))
                    if key.endswith("Items") and bound < 200:
                        lengths.update({max(int(bound) - 1, 0), int(bound), int(bound) + 1})
    return values, list(dict.fromkeys(names)), sorted(lengths)


def _around(bound: float) -> list[Any]:
    out: list[Any] = [bound, bound - 1, bound + 1, bound - 0.5, bound + 0.5, bound * 2, bound * 3]
    if isinstance(bound, float) and bound.is_integer():
        out.append(int(bound))
    if bound:
        out.append(bound / 2)
    return out


def _dedupe(values: list[Any]) -> list[Any]:
    seen: set[str] = set()
    out: list[Any] = []
    for value in values:
        key = json.dumps(value, sort_keys=True, default=str) + type(value).__name__
        if key not in seen:
            seen.add(key)
            out.append(value)
    return out


def structural_candidates(writer: Any, reader: Any, limit: int = 6000) -> Iterator[Any]:
    """Boundary values and shapes made from what the two schemas name: scalars, each named property
    set to each candidate (alone, or with every other name filled by an example), arrays of each
    candidate and tuples up to the lengths the schemas mention."""
    literals, names, lengths = _collect([writer, reader])
    leaves = _dedupe(_SCALARS + literals)
    count = 0

    def emit(value: Any) -> Iterator[Any]:
        nonlocal count
        count += 1
        yield value

    for value in leaves:
        yield from emit(value)
    for name in names:
        for value in leaves:
            yield from emit({name: value})
    if names:
        for value in leaves:
            yield from emit(dict.fromkeys(names, value))
        for fill in leaves:
            for name in names:
                for value in leaves[:40]:
                    if count > limit:
                        return
                    row = dict.fromkeys(names, fill)
                    row[name] = value
                    yield from emit(row)
        yield from emit({"__extra__": 1})
        yield from emit({**dict.fromkeys(names, 1), "__extra__": "a"})
    for value in leaves:
        yield from emit([value])
        yield from emit([value, value])
    for size in lengths:
        for value in leaves:
            if count > limit:
                return
            yield from emit([value] * size)
            yield from emit([*([leaves[0]] * max(size - 1, 0)), value])
    for size in lengths:
        for first in leaves[:30]:
            for second in leaves[:30]:
                if count > limit:
                    return
                yield from emit([first, second, *([second] * max(size - 2, 0))])


# --------------------------------------------------------------------------------------------
# hypothesis-jsonschema


class _Timeout(Exception):
    pass


def _alarm(_signum: int, _frame: FrameType | None) -> None:
    raise _Timeout


def hypothesis_examples(schema: Any, count: int, seconds: float) -> tuple[list[Any], str | None]:
    """Up to ``count`` instances of ``schema`` from hypothesis-jsonschema, derandomized, stopped after
    ``seconds``. Returns the examples and a note when the generator failed or was cut short."""
    try:
        from hypothesis import HealthCheck, Phase, given, settings  # noqa: PLC0415 - optional dependency
        from hypothesis_jsonschema import from_schema  # noqa: PLC0415 - optional dependency
    except ImportError as error:
        return [], f"hypothesis-jsonschema unavailable: {error}"
    found: list[Any] = []
    try:
        strategy = from_schema(schema)
    except Exception as error:  # noqa: BLE001 - unsupported schemas fall back to the generator
        return [], f"from_schema: {type(error).__name__}: {str(error)[:120]}"

    @settings(
        max_examples=count,
        derandomize=True,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(value: Any) -> None:
        found.append(value)

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    note: str | None = None
    try:
        collect()
    except _Timeout:
        note = f"hypothesis stopped after {seconds:g}s"
    except Exception as error:  # noqa: BLE001
        note = f"hypothesis: {type(error).__name__}: {str(error)[:120]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return found, note


# --------------------------------------------------------------------------------------------
# The checker under test


@dataclass
class Judgement:
    compatible: bool | None
    reasons: list[str] = field(default_factory=list)
    counterexample: Any = _MISSING
    error: str | None = None


def _load_checker() -> tuple[str, Callable[[Any, Any, str], Judgement]]:
    """``kvlog.check.compare``, asked with the pair's draft."""
    from kvlog.check import compare  # noqa: PLC0415

    def checker(writer: Any, reader: Any, draft: str) -> Judgement:
        verdict = compare(writer, reader, mode="backward", draft=draft)  # type: ignore[arg-type]
        reasons = [f"{r.path}: {r.message}" for r in verdict.reasons]
        counterexample = verdict.counterexample if verdict.compatible is False else _MISSING
        return Judgement(verdict.compatible, reasons, counterexample)

    return "kvlog.check.compare(old=writer, new=reader, mode='backward', draft=<pair's draft>)", checker


# --------------------------------------------------------------------------------------------
# One pair


@dataclass
class Row:
    suite: str
    source: str
    name: str
    peer_compatible: bool | None
    truth: bool | None = None  # None: the schemas could not be validated
    witness: Any = None
    witness_from: str | None = None
    kvlog: bool | None = None
    kvlog_reasons: list[str] = field(default_factory=list)
    kvlog_error: str | None = None
    kvlog_counterexample: Any = None
    bad_counterexample: bool = False
    outcome: str = ""  # right, wrong, undecided, unsafe, exception, no-truth
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def judge_pair(
    pair: dict[str, Any],
    checker: Callable[[Any, Any, str], Judgement],
    validators: _Validators,
    examples: int,
    deadline: float,
    default_draft: str,
) -> Row:
    start = time.perf_counter()
    writer, reader = pair["writer"], pair["reader"]
    row = Row(pair.get("suite", "?"), pair.get("source", "?"), pair.get("name", ""), pair.get("peer_compatible"))

    # kvlog first (on copies: the checker must not see or leave mutations)
    judgement: Judgement | None = None
    try:
        validators.draft = pair.get("draft", default_draft)
        judgement = checker(copy.deepcopy(writer), copy.deepcopy(reader), validators.draft)
        row.kvlog, row.kvlog_reasons = judgement.compatible, judgement.reasons[:8]
    except Exception as error:  # noqa: BLE001
        row.kvlog_error = f"{type(error).__name__}: {str(error)[:200]}"

    # truth by witness search
    try:
        validators.get(writer)
        validators.get(reader)
    except Exception as error:  # noqa: BLE001
        row.notes.append(f"schema not usable by jsonschema: {type(error).__name__}: {str(error)[:120]}")
        row.outcome = "no-truth"
        row.seconds = time.perf_counter() - start
        return row

    def found(value: Any, source: str) -> bool:
        if breaks(validators, writer, reader, value):
            row.witness, row.witness_from = value, source
            return True
        return False

    witness = False
    if judgement is not None and judgement.counterexample is not _MISSING:
        row.kvlog_counterexample = judgement.counterexample
        witness = found(judgement.counterexample, "kvlog")
        row.bad_counterexample = not witness
    if not witness:
        for value in structural_candidates(writer, reader):
            if found(value, "structural"):
                witness = True
                break
    if not witness:
        generated, note = hypothesis_examples(writer, examples, deadline)
        if note:
            row.notes.append(note)
        for value in generated:
            if found(value, "hypothesis"):
                witness = True
                break
    row.truth = not witness

    if row.kvlog_error is not None:
        row.outcome = "exception"
    elif row.kvlog is None:
        row.outcome = "undecided"
    elif row.kvlog == row.truth:
        row.outcome = "right"
    elif row.kvlog and not row.truth:
        row.outcome = "unsafe"
    else:
        row.outcome = "wrong"
    row.seconds = time.perf_counter() - start
    return row


# --------------------------------------------------------------------------------------------
# Report


def _summary(rows: list[Row]) -> dict[str, int]:
    decided = [r for r in rows if r.truth is not None]
    return {
        "pairs": len(rows),
        "truth_compatible": sum(r.truth is True for r in rows),
        "truth_incompatible": sum(r.truth is False for r in rows),
        "no_truth": sum(r.truth is None for r in rows),
        "kvlog_right": sum(r.outcome == "right" for r in rows),
        "kvlog_wrong": sum(r.outcome in ("wrong", "unsafe") for r in rows),
        "kvlog_undecided": sum(r.outcome == "undecided" for r in rows),
        "kvlog_unsafe": sum(r.outcome == "unsafe" for r in rows),
        "kvlog_exceptions": sum(r.outcome == "exception" for r in rows),
        "bad_counterexamples": sum(r.bad_counterexample for r in rows),
        "peer_right": sum(r.peer_compatible == r.truth for r in decided),
        "peer_wrong": sum(r.peer_compatible is not None and r.peer_compatible != r.truth for r in decided),
    }


def _short(value: Any, width: int = 100) -> str:
    text = json.dumps(value, default=str) if value is not None else "null"
    return text if len(text) <= width else text[: width - 3] + "..."


def _verdict(value: bool | None) -> str:
    return {True: "compatible", False: "incompatible", None: "undecided"}[value]


def _selected(row: Row, show: str) -> bool:
    if show == "all":
        return True
    if show == "wrong":
        return row.outcome in ("wrong", "unsafe") or row.bad_counterexample
    if show == "peer-wrong":
        return row.truth is not None and row.peer_compatible is not None and row.peer_compatible != row.truth
    return row.outcome == show


def print_report(rows: list[Row], checker_name: str, elapsed: float, show: str | None) -> None:
    print(f"checker: {checker_name}")
    suites = sorted({r.suite for r in rows})
    columns = [*suites, "total"]
    table = {suite: _summary([r for r in rows if r.suite == suite]) for suite in suites}
    table["total"] = _summary(rows)
    width = max(len(key) for key in table["total"])
    print(f"{'':<{width}}  " + "  ".join(f"{c:>10}" for c in columns))
    for key in table["total"]:
        print(f"{key:<{width}}  " + "  ".join(f"{table[c][key]:>10}" for c in columns))
    cut = sum(any("stopped after" in n for n in r.notes) for r in rows)
    failed = sum(any(n.startswith(("from_schema", "hypothesis:")) for n in r.notes) for r in rows)
    print(f"hypothesis: {failed} pairs unsupported (structural generator only), {cut} cut by the deadline")
    slowest = max(rows, key=lambda r: r.seconds, default=None)
    if slowest is not None:
        print(f"time: {elapsed:.1f}s for {len(rows)} pairs; slowest {slowest.seconds:.1f}s ({slowest.source})")
    if show is None:
        return
    chosen = [r for r in rows if _selected(r, show)]
    print(f"\n{len(chosen)} pairs ({show}):")
    for r in chosen:
        print(f"- [{r.suite}] {r.source}: {r.name}")
        print(
            f"  truth {_verdict(r.truth)}, kvlog {_verdict(r.kvlog) if r.kvlog_error is None else 'ERROR'}"
            f" ({r.outcome}), peer {_verdict(r.peer_compatible)}"
        )
        if r.witness_from is not None:
            print(f"  witness ({r.witness_from}): {_short(r.witness)}")
        if r.bad_counterexample:
            print(f"  bad kvlog counterexample: {_short(r.kvlog_counterexample)}")
        if r.kvlog_error:
            print(f"  error: {r.kvlog_error}")
        for reason in r.kvlog_reasons[:3]:
            print(f"  reason: {reason[:160]}")
        for note in r.notes:
            print(f"  note: {note[:160]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=Path, default=DEFAULT_PAIRS)
    parser.add_argument("--show", choices=SHOW_CHOICES)
    parser.add_argument("--json", type=Path, help="write the per-pair table here")
    parser.add_argument("--examples", type=int, default=300, help="hypothesis examples per pair")
    parser.add_argument("--deadline", type=float, default=5.0, help="seconds of hypothesis per pair")
    parser.add_argument("--suite", help="only this suite")
    parser.add_argument("--limit", type=int, help="only the first N pairs (for a quick look)")
    parser.add_argument(
        "--memory-gb",
        type=float,
        default=6.0,
        help="address-space cap, so a checker that blows up raises MemoryError on its pair instead of "
        "getting the whole run OOM-killed (0: no cap)",
    )
    parser.add_argument(
        "--default-draft",
        choices=tuple(_BY_DRAFT),
        default="draft-07",
        help="draft for schemas without $schema (the peers' suites are written in draft-07 style)",
    )
    args = parser.parse_args(argv)
    if args.memory_gb > 0:
        cap = int(args.memory_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (cap, resource.getrlimit(resource.RLIMIT_AS)[1]))

    pairs: list[dict[str, Any]] = json.loads(args.pairs.expanduser().read_text())
    if args.suite:
        pairs = [p for p in pairs if p.get("suite") == args.suite]
    if args.limit:
        pairs = pairs[: args.limit]
    checker_name, checker = _load_checker()
    validators = _Validators(args.default_draft)
    start = time.perf_counter()
    rows: list[Row] = []
    for pair in pairs:
        try:
            rows.append(judge_pair(pair, checker, validators, args.examples, args.deadline, args.default_draft))
        except Exception as error:  # noqa: BLE001 - the harness never dies on one pair
            row = Row(pair.get("suite", "?"), pair.get("source", "?"), pair.get("name", ""), None)
            row.outcome, row.kvlog_error = "exception", f"harness: {type(error).__name__}: {error}"
            rows.append(row)
    elapsed = time.perf_counter() - start
    print_report(rows, checker_name, elapsed, args.show)
    if args.json:
        args.json.write_text(json.dumps([_jsonable(r) for r in rows], indent=1, default=str) + "\n")
    return 0


def _jsonable(row: Row) -> dict[str, Any]:
    data = asdict(row)
    if row.kvlog_counterexample is _MISSING:
        data["kvlog_counterexample"] = None
    return data


if __name__ == "__main__":
    sys.exit(main())
