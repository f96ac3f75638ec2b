"""Build the peer-suite pairs that ``benchmarks/peer_compat.py`` scores ``kvlog.check.compare`` on.

The pairs are the held-out measure of kvlog's compatibility verdict: questions written by two other
schema registries for their own checkers. CI has no network, so the peers' test files are fetched
by hand into a raw directory, and neither they nor the pairs built from them are ever committed.
This script is the one way from those files to the pairs, so a rebuild is reproducible::

    RAW_DIR/confluentinc/schema-registry/json-schema-provider/src/test/resources/diff-*.json
    RAW_DIR/Aiven-Open/karapace/tests/schemas/json_schemas.py
    RAW_DIR/Aiven-Open/karapace/tests/unit/compatibility/jsonschema/test_jsonschema_compatibility.py
    RAW_DIR/Aiven-Open/karapace/tests/unit/compatibility/jsonschema/test_draft_2019_2020_compatibility.py

    python benchmarks/peer_pairs.py RAW_DIR -o ~/.cache/kvlog-peers/pairs.json

Confluent's files are JSON lists of ``{description, original_schema, update_schema, compatible}``
(writer = original, reader = update); one has a trailing comma, so a strict parse that fails is
retried with trailing commas removed. Karapace's checks live in Python test modules: each module is
executed with its imports stubbed, ``compatibility(reader=..., writer=...)`` recording every check,
and each test is re-run under verdict schedules until its assertions pass; a check's expected
verdict is the one every passing schedule gives it. A check whose verdict the test does not assert
gets ``peer_compatible: null``; one whose verdict is asserted only relative to another check's (or
whose test no schedule satisfies, such as the fail-closed guard's message checks) is skipped, as is
one naming a schema constant missing from the fetched ``json_schemas.py``. Everything skipped is
said on stderr. Each pair is ``suite, source, name, writer, reader, peer_compatible, draft`` plus
``metadata`` (Confluent pairs with ``confluent:`` metadata) and ``peer_compatible_lenient``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import types
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONFLUENT_DIR = Path("confluentinc/schema-registry/json-schema-provider/src/test/resources")
KARAPACE_DIR = Path("Aiven-Open/karapace/tests")
KARAPACE_SCHEMAS = KARAPACE_DIR / "schemas/json_schemas.py"
KARAPACE_TESTS = KARAPACE_DIR / "unit/compatibility/jsonschema"

# (file, draft of a schema without ``$schema``): the 2020-12 files are run under 2020-12 whatever they say.
CONFLUENT_FILES = (
    ("diff-schema-examples.json", "draft-07"),
    ("diff-combined-schema-examples.json", "draft-07"),
    ("diff-schema-examples-2020-12.json", "2020-12"),
    ("diff-combined-schema-examples-2020-12.json", "2020-12"),
)
KARAPACE_FILES = ("test_jsonschema_compatibility.py", "test_draft_2019_2020_compatibility.py")
KARAPACE_DEFAULT_DRAFT = "draft-07"
_DRAFTS = ("2020-12", "2019-09", "draft-07", "draft-06", "draft-04")
_EXHAUSTIVE_MAX = 10  # a test with at most this many checks has every verdict schedule tried

Pair = dict[str, Any]


def note(message: str) -> None:
    print(message, file=sys.stderr)


def draft_of(schema: Any, default: str) -> str:
    """The draft a schema names in ``$schema``, else ``default``."""
    if isinstance(schema, dict) and "$schema" in schema:
        uri = str(schema["$schema"])
        return next((d for d in _DRAFTS if d in uri), uri)
    return default


def lenient_load(path: Path) -> tuple[Any, bool]:
    """Parse JSON, retrying with trailing commas removed; the flag says whether the retry was needed."""
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text), False
    except json.JSONDecodeError:
        return json.loads(re.sub(r",(\s*[}\]])", r"\1", text)), True


# --------------------------------------------------------------------------------------------
# Confluent Schema Registry


def confluent_pairs(raw: Path) -> list[Pair]:
    pairs: list[Pair] = []
    for filename, default in CONFLUENT_FILES:
        path = raw / CONFLUENT_DIR / filename
        if not path.exists():
            note(f"confluent {filename}: not in {path.parent}, skipped")
            continue
        data, lenient = lenient_load(path)
        if lenient:
            note(f"confluent {filename}: not strict JSON (trailing commas); parsed with them removed")
        for i, example in enumerate(data):
            writer, reader = example["original_schema"], example["update_schema"]
            pair: Pair = {
                "suite": "confluent",
                "source": f"{filename}:{i}",
                "name": example["description"],
                "writer": writer,
                "reader": reader,
                "peer_compatible": example["compatible"],
                "draft": default if default == "2020-12" else draft_of(writer, default),
            }
            if "compatible_lenient" in example:
                pair["peer_compatible_lenient"] = example["compatible_lenient"]
            texts = json.dumps(writer) + json.dumps(reader)
            if "original_metadata" in example or "update_metadata" in example or "confluent:" in texts:
                pair["metadata"] = True
            pairs.append(pair)
    return pairs


# --------------------------------------------------------------------------------------------
# Karapace: its test modules run against stubs


class Schema:
    """What the stubbed ``parse_jsonschema_definition`` returns: the parsed JSON and its constant's name."""

    missing = False

    def __init__(self, js: Any, name: str | None = None) -> None:
        self.js, self.name = js, name

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Schema)
            and not self.missing
            and not other.missing
            and type(self.js) is type(other.js)
            and self.js == other.js
        )

    def __hash__(self) -> int:
        return 0


class MissingSchema(Schema):
    """A constant the test imports that the fetched ``json_schemas.py`` does not define."""

    missing = True

    def __init__(self, name: str) -> None:
        super().__init__(None, name)

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)


def parse_schema(text: str) -> Schema:
    return Schema(json.loads(text))


class CompatibilityType:
    compatible = "compatible"
    incompatible = "incompatible"


class CompatibilityResult:
    def __init__(
        self, compatibility: str, locations: Any = (), incompatibilities: Any = (), messages: Any = ()
    ) -> None:
        self.compatibility = compatibility
        self.locations = set(locations)
        self.incompatibilities = list(incompatibilities)
        self.messages = list(messages)


@dataclass
class Check:
    reader: Schema
    writer: Schema
    mode: str | None


@dataclass
class Recorder:
    """The stubbed checker: answers from a verdict schedule (compatible past its end) and records each call."""

    schedule: list[bool] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    mode: str | None = None

    def compatibility(self, reader: Schema, writer: Schema) -> CompatibilityResult:
        verdict = self.schedule[len(self.checks)] if len(self.checks) < len(self.schedule) else True
        self.checks.append(Check(reader, writer, self.mode))
        if verdict:
            return CompatibilityResult(CompatibilityType.compatible)
        return CompatibilityResult(CompatibilityType.incompatible, {"#"}, ["stub"])

    def check_compatibility(self, old: Schema, new: Schema, mode: str) -> CompatibilityResult:
        """``SchemaCompatibility.check_compatibility``: the mode's directions through ``compatibility``."""
        directions = {"BACKWARD": [(new, old)], "FORWARD": [(old, new)], "FULL": [(new, old), (old, new)]}
        verdicts = []
        for reader, writer in directions.get(mode, []):
            self.mode = mode
            verdicts.append(self.compatibility(reader=reader, writer=writer).compatibility)
            self.mode = None
        if all(v == CompatibilityType.compatible for v in verdicts):
            return CompatibilityResult(CompatibilityType.compatible)
        return CompatibilityResult(CompatibilityType.incompatible, {"#"}, ["stub"])


class CompatibilityModes:
    BACKWARD, FORWARD, FULL, NONE = "BACKWARD", "FORWARD", "FULL", "NONE"


class SchemaTypeStub:
    JSONSCHEMA = "JSONSCHEMA"


class TypedSchemaStub:
    @staticmethod
    def parse(schema_type: str, text: str) -> Schema:
        return parse_schema(text)


def parametrize(names: str | list[str], values: list[Any], **_: Any) -> Callable[[Any], Any]:
    """``pytest.mark.parametrize``: the argument sets are kept on the function, stacked decorators multiplied."""
    keys = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)

    def mark(fn: Any) -> Any:
        sets = [dict(zip(keys, v if len(keys) > 1 else (v,), strict=True)) for v in values]
        outer = getattr(fn, "_peer_params", [{}])
        fn._peer_params = [{**a, **b} for a in outer for b in sets]
        return fn

    return mark


@contextmanager
def stubbed_modules(recorder: Recorder, schemas_module: types.ModuleType | None) -> Iterator[None]:
    """Install the stub modules the Karapace tests import, and put back whatever was there."""
    mark = types.SimpleNamespace(parametrize=parametrize)
    contents: dict[str, dict[str, Any]] = {
        "pytest": {"mark": mark},
        "avro": {},
        "avro.compatibility": {
            "SchemaCompatibilityResult": CompatibilityResult,
            "SchemaCompatibilityType": CompatibilityType,
        },
        "jsonschema": {"Draft7Validator": object},
        "karapace": {},
        "karapace.schema_models": {"parse_jsonschema_definition": parse_schema},
        "karapace.compatibility": {"CompatibilityModes": CompatibilityModes},
        "karapace.compatibility.jsonschema": {},
        "karapace.compatibility.jsonschema.checks": {"compatibility": recorder.compatibility},
        "karapace.core": {},
        "karapace.core.schema_models": {
            "parse_jsonschema_definition": parse_schema,
            "ParsedTypedSchema": TypedSchemaStub,
            "ValidatedTypedSchema": TypedSchemaStub,
        },
        "karapace.core.schema_type": {"SchemaType": SchemaTypeStub},
        "karapace.core.compatibility": {"CompatibilityModes": CompatibilityModes},
        "karapace.core.compatibility.jsonschema": {},
        "karapace.core.compatibility.jsonschema.checks": {"compatibility": recorder.compatibility},
        "karapace.core.compatibility.schema_compatibility": {
            "SchemaCompatibility": types.SimpleNamespace(check_compatibility=recorder.check_compatibility)
        },
        "tests": {},
        "tests.schemas": {},
    }
    saved = {name: sys.modules.get(name) for name in [*contents, "tests.schemas.json_schemas"]}
    try:
        for name, attrs in contents.items():
            module = types.ModuleType(name)
            module.__dict__.update(attrs)
            sys.modules[name] = module
        if schemas_module is not None:
            sys.modules["tests.schemas.json_schemas"] = schemas_module
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def load_schemas(path: Path, missing: set[str]) -> types.ModuleType:
    """Run ``json_schemas.py``; each constant's schema is named after it, an undefined one is a placeholder."""
    module = types.ModuleType("tests.schemas.json_schemas")
    with stubbed_modules(Recorder(), None):
        exec(compile(path.read_text(encoding="utf-8"), path.name, "exec"), module.__dict__)
    for key, value in list(module.__dict__.items()):
        if isinstance(value, Schema) and value.name is None:
            value.name = key

    def undefined(name: str) -> MissingSchema:
        if name.startswith("__"):
            raise AttributeError(name)
        missing.add(name)
        return MissingSchema(name)

    module.__getattr__ = undefined  # type: ignore[method-assign]
    return module


def collect_tests(namespace: dict[str, Any]) -> Iterator[tuple[str, Callable[[], Any]]]:
    """Each test as pytest would find it: module functions, then methods of ``Test*`` classes, per parameter set."""
    found: list[tuple[str, Any]] = []
    for name, value in list(namespace.items()):
        if name.startswith("test_") and isinstance(value, types.FunctionType):
            found.append((name, value))
        elif name.startswith("Test") and isinstance(value, type):
            found += [(n, getattr(value(), n)) for n in vars(value) if n.startswith("test_")]
    for name, fn in found:
        params = getattr(fn, "_peer_params", None)
        if params is None:
            yield name, fn
            continue
        for i, kwargs in enumerate(params):
            yield f"{name}[{i}]", lambda fn=fn, kwargs=kwargs: fn(**kwargs)


def run_under(recorder: Recorder, test: Callable[[], Any], schedule: list[bool]) -> tuple[bool, list[Check]]:
    recorder.schedule, recorder.checks = list(schedule), []
    try:
        test()
    except AssertionError:
        return False, recorder.checks
    return True, recorder.checks


def solve(recorder: Recorder, test: Callable[[], Any]) -> tuple[list[Check], list[bool | str | None]] | None:
    """The checks a test makes and each one's expected verdict: True, False, None (not asserted) or "relative".

    None when no schedule of verdicts makes the test pass.
    """
    schedule: list[bool] = []
    while True:  # greedy: a failed assertion blames the last check before it
        ok, checks = run_under(recorder, test, schedule)
        if ok:
            break
        if not checks or (len(checks) <= len(schedule) and not schedule[len(checks) - 1]):
            schedule = []
            break
        schedule = (schedule + [True] * len(checks))[: len(checks)]
        schedule[-1] = False
    count = len(checks) if ok else len(run_under(recorder, test, [])[1])
    if count <= _EXHAUSTIVE_MAX:
        passing = []
        for candidate in itertools.product((True, False), repeat=count):
            ok_c, checks_c = run_under(recorder, test, list(candidate))
            if ok_c and len(checks_c) == count:
                passing.append(candidate)
        if not passing:
            return None
        schedule = list(passing[0])
        verdicts: list[bool | str | None] = []
        for i in range(count):
            values = {s[i] for s in passing}
            if len(values) == 1:
                verdicts.append(values.pop())
            elif all((*s[:i], not s[i], *s[i + 1 :]) in passing for s in passing):
                verdicts.append(None)
            else:
                verdicts.append("relative")
    else:
        if not ok:
            return None
        schedule = (schedule + [True] * count)[:count]
        verdicts = []
        for i in range(count):
            flipped = [*schedule[:i], not schedule[i], *schedule[i + 1 :]]
            verdicts.append(None if run_under(recorder, test, flipped)[0] else schedule[i])
    checks = run_under(recorder, test, schedule)[1]
    return checks, verdicts


def karapace_pairs(raw: Path) -> list[Pair]:
    schemas_path = raw / KARAPACE_SCHEMAS
    if not schemas_path.exists():
        note(f"karapace: {schemas_path} not fetched, Karapace skipped")
        return []
    missing: set[str] = set()
    schemas = load_schemas(schemas_path, missing)
    pairs: list[Pair] = []
    for filename in KARAPACE_FILES:
        path = raw / KARAPACE_TESTS / filename
        if not path.exists():
            note(f"karapace {filename}: not in {path.parent}, skipped (no pairs from it)")
            continue
        recorder = Recorder()
        missing.clear()
        unsolved: list[str] = []
        skipped: list[str] = []
        index = 0
        with stubbed_modules(recorder, schemas):
            namespace: dict[str, Any] = {"__name__": f"peer_{path.stem}"}
            exec(compile(path.read_text(encoding="utf-8"), filename, "exec"), namespace)
            for test_name, test in collect_tests(namespace):
                solved = solve(recorder, test)
                if solved is None:
                    unsolved.append(test_name)
                    continue
                for check, verdict in zip(*solved, strict=True):
                    k, index = index, index + 1
                    reader, writer = check.reader, check.writer
                    if reader.missing or writer.missing:
                        skipped.append(f"{test_name}:{k} reader={reader.name} writer={writer.name} (undefined)")
                        continue
                    if verdict == "relative":
                        skipped.append(f"{test_name}:{k} (verdict asserted only relative to another check)")
                        continue
                    name = f"{test_name}: reader={reader.name} writer={writer.name}"
                    if reader.name is None and writer.name is None:
                        name = test_name
                    if check.mode:
                        name += f" [{check.mode}]"
                    if verdict is None:
                        name += " (verdict not asserted)"
                    pairs.append(
                        {
                            "suite": "karapace",
                            "source": f"{filename}:{test_name}:{k}",
                            "name": name,
                            "writer": writer.js,
                            "reader": reader.js,
                            "peer_compatible": verdict,
                            "draft": draft_of(writer.js, draft_of(reader.js, KARAPACE_DEFAULT_DRAFT)),
                        }
                    )
        note(f"karapace {filename}: {index} checks recorded, {len(skipped)} skipped")
        if missing:
            note(f"  schema constants not in the fetched json_schemas.py: {', '.join(sorted(missing))}")
        for line in skipped:
            note(f"  skipped {line}")
        for test_name in unsolved:
            note(f"  skipped test {test_name}: no verdicts make its assertions pass against the stub")
    return pairs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("raw", type=Path, help="directory holding the fetched peer files, by owner/repo/path")
    parser.add_argument("-o", "--output", type=Path, required=True, help="where to write the pairs (JSON list)")
    args = parser.parse_args(argv)
    if not args.raw.is_dir():
        parser.error(f"{args.raw} is not a directory")
    pairs = confluent_pairs(args.raw) + karapace_pairs(args.raw)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(pairs, indent=1) + "\n", encoding="utf-8")
    counts = Counter((p["suite"], p["source"].split(":")[0]) for p in pairs)
    for suite in sorted({s for s, _ in counts}):
        print(f"{suite}: {sum(n for (s, _), n in counts.items() if s == suite)}")
        for (s, filename), n in sorted(counts.items()):
            if s == suite:
                print(f"  {filename}: {n}")
    print(f"total: {len(pairs)} pairs -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
