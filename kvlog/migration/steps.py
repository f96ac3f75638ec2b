"""The migration chain: every step file under ``migrations/``, loaded, checked and linked.

Two kinds of step, one file each. An *event step* (``migrations/<event>/v<a>-to-v<b>.toml``) turns
``<event>@a`` into ``<event>@b`` by a list of declarative operations. A *text step*
(``migrations/sglang-text/<id>.toml``) reads the lines of one era of sglang into events of a catalog
version. Adding a version later is a new file, not a code change. Every step declares examples
(input -> expected output) that the test suite and ``kvlog check`` run.
"""

from __future__ import annotations

import gc
import re
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from kvlog.errors import UnknownEventError
from kvlog.io import jsonline
from kvlog.migration import grammar, sampling, wording_windows
from kvlog.migration.dating import DateContext, complete
from kvlog.migration.errors import ApplyError, GrammarError, MigrationError, OpError
from kvlog.migration.grammar import Generation, build_generation, build_known
from kvlog.migration.ops import Op, compile_op, provenance
from kvlog.schema import stored
from kvlog.schema.catalog import Catalog, default_catalog, kept_key
from kvlog.schema.resources import data_dir
from kvlog.text import template, units, wording
from kvlog.text.prefix import SERVERS

#: a server's text generations live in ``<server>-text/`` (``sglang-text``, ``vllm-text``)
TEXT_SUFFIX = "-text"
#: the memory lines a server prints that are known and deliberately no event, with the reason for each
KNOWN_FILE = "known.toml"
_EVENT_STEP_FILE = re.compile(r"^v([1-9][0-9]*)-to-v([1-9][0-9]*)\.toml$")
_GENERATION_FILE = re.compile(r"^[0-9]{4}-[0-9]{2}(?:-[a-z0-9-]+)?\.toml$")


@dataclass(frozen=True)
class Step:
    """One migration step: from a source (event version or text format) to a target version."""

    id: str
    path: Path
    event: str | None
    source: str
    target: str
    from_version: int | None
    to_version: int
    invertible: bool
    examples: list[tuple[dict[str, Any], dict[str, Any]]]
    _run: Callable[[dict[str, Any]], dict[str, Any]] = field(repr=False, compare=False)
    generation: Generation | None = field(default=None, repr=False, compare=False)
    #: an event step's operations, for what they read and write (``kvlog.migration.engine`` reuses results by them)
    ops: tuple[Op, ...] = field(default=(), repr=False, compare=False)

    def apply(self, event: dict[str, Any]) -> dict[str, Any]:
        """The step's output for ``event`` (a text step takes ``{"line": "..."}``); the input is not changed."""
        try:
            return self._run(event)
        except (ApplyError, KeyError, TypeError, ValueError) as exc:
            raise MigrationError(f"{self.id}: cannot apply to this input: {exc}") from None


@dataclass(frozen=True)
class Chain:
    """All steps, with the paths between versions of each event."""

    steps: list[Step]
    catalog: Catalog = field(repr=False, compare=False)
    #: by server: memory lines that are known and deliberately no event (``<server>-text/known.toml``), tried last
    known: Mapping[str, Generation] = field(default_factory=dict, repr=False, compare=False)
    #: the routes found so far: every migrated event asks for one, and the steps never change
    _routes: dict[tuple[str, int, int], tuple[Step, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def path(self, event: str, from_version: int, to_version: int) -> list[Step]:
        """The steps, in order, that take ``event@from_version`` to ``event@to_version`` (up or down)."""
        key = (event, from_version, to_version)
        route = self._routes.get(key)
        if route is None:
            route = self._routes[key] = tuple(self._search(event, from_version, to_version))
        return list(route)

    def _search(self, event: str, from_version: int, to_version: int) -> list[Step]:
        if from_version == to_version:
            return []
        edges: dict[int, list[Step]] = {}
        for step in self.steps:
            if step.event == event and step.from_version is not None:
                edges.setdefault(step.from_version, []).append(step)
        previous: dict[int, Step] = {}
        queue = deque([from_version])
        while queue:
            version = queue.popleft()
            for step in edges.get(version, ()):
                if step.to_version not in previous and step.to_version != from_version:
                    previous[step.to_version] = step
                    queue.append(step.to_version)
        if to_version not in previous:
            raise MigrationError(f"no migration path from {event}@{from_version} to {event}@{to_version}")
        route: list[Step] = []
        version = to_version
        while version != from_version:
            step = previous[version]
            route.append(step)
            version = step.from_version  # type: ignore[assignment]
        return route[::-1]

    def covers(self, event: str, from_version: int, to_version: int) -> Step | None:
        """The single step from ``event@from_version`` to ``event@to_version``, if there is one."""
        for step in self.steps:
            if step.event == event and step.from_version == from_version and step.to_version == to_version:
                return step
        return None

    def text_formats(self) -> list[str]:
        """Ids of the text formats the chain reads, oldest first."""
        return sorted(step.source for step in self.steps if step.event is None)

    def generations(self, server: str | None = None) -> list[Generation]:
        """The text generations (of one server), oldest first: the order lines are tried in.

        A wording several eras printed unchanged is read by the oldest, whose events carry the v1
        claim ("allocated") as inferred, so the per-rank context can still correct it.
        """
        steps = sorted((s for s in self.steps if s.generation is not None), key=lambda s: s.source)
        found = [s.generation for s in steps if s.generation is not None]
        return [g for g in found if server is None or g.server == server]

    def servers(self) -> list[str]:
        """The servers whose lines the chain reads."""
        return sorted({g.server for g in self.generations()} | set(self.known))


def load_chain(directory: Path | None = None, catalog: Catalog | None = None) -> Chain:
    """Load and check every step file under ``directory`` (default: kvlog's shipped migrations).

    The garbage collector is paused meanwhile: the chain's thousands of rules live as long as the run,
    so the collections their allocations would set off (a twentieth of a run's start-up) find nothing.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _load_chain(directory, catalog)
    finally:
        if enabled:
            gc.enable()


def _load_chain(directory: Path | None, catalog: Catalog | None) -> Chain:
    root = directory if directory is not None else data_dir("migrations")
    catalog = catalog or default_catalog()
    if not root.is_dir():
        raise MigrationError(f"{root}: not a migrations directory")
    steps: list[Step] = []
    known: dict[str, Generation] = {}
    paths = sorted(root.rglob("*.toml"))
    key = _documents_key(root, paths)
    kept = stored.load("migrations", key) if key is not None else None
    documents: dict[str, Any] = kept if isinstance(kept, dict) else {}
    rules_key = _rules_key(key, catalog)
    plans = _plans(stored.load("rules", rules_key)) if rules_key is not None else {}
    for path in paths:
        relative = path.relative_to(root)
        if len(relative.parts) != 2:
            raise MigrationError(f"{path}: step files live in <event>/ or <server>{TEXT_SUFFIX}/, one level down")
        document = documents.get(relative.as_posix())
        if not isinstance(document, dict):
            document = documents[relative.as_posix()] = _read(path)
        folder = relative.parts[0]
        try:
            if folder.endswith(TEXT_SUFFIX) and folder.removesuffix(TEXT_SUFFIX) not in SERVERS:
                raise OpError(f"no server {folder.removesuffix(TEXT_SUFFIX)!r} (kvlog reads {', '.join(SERVERS)})")
            if folder.endswith(TEXT_SUFFIX) and relative.name == KNOWN_FILE:
                _check_keys(document, {"description", "known"})
                generation_id = f"{folder}/{relative.stem}"
                generation = build_known(generation_id, document, catalog, plans.get(generation_id))
                known[generation.server] = generation
            elif folder.endswith(TEXT_SUFFIX):
                steps.append(_text_step(path, relative, document, catalog, plans))
            else:
                steps.append(_event_step(path, relative, document, catalog))
        except (OpError, GrammarError, UnknownEventError) as exc:
            raise MigrationError(f"{path}: {exc}") from None
    seen: dict[tuple[str, str], Path] = {}
    for step in steps:
        step_key = (step.source, step.target)
        if step_key in seen:
            raise MigrationError(f"{step.path}: {step.source} -> {step.target} is already defined by {seen[step_key]}")
        seen[step_key] = step.path
    if key is not None and documents is not kept:
        stored.store("migrations", key, documents)
    if rules_key is not None and not plans:  # every rule compiled, so every one compiles: later runs compile lazily
        generations = [*(s.generation for s in steps if s.generation is not None), *known.values()]
        stored.store("rules", rules_key, {generation.id: generation.rule_starts() for generation in generations})
    return Chain(steps, catalog, known)


#: the code a generation's rules are compiled by: a change to it is a new ``_rules_key``
_RULE_SOURCES = (grammar, template, units, wording, wording_windows, sampling)


def _rules_key(documents_key: str | None, catalog: Catalog) -> str | None:
    """The key of each generation's rule starts in ``kvlog.schema.stored``; None where nothing is kept.

    Kept only after every rule of the chain compiled, so a run that finds them for the same step
    files, catalog and compiling code may compile each rule when a line first needs it: it cannot
    fail then. Compiling all thousand-odd rules was most of a run's start-up, and a run meets few.
    """
    catalog_key = kept_key(catalog)
    if documents_key is None or catalog_key is None:
        return None
    try:
        code = stored.sources([module.__file__ for module in _RULE_SOURCES if module.__file__ is not None])
    except OSError:
        return None
    return stored.digest([documents_key.encode(), catalog_key.encode(), *code])


def _plans(kept: Any) -> dict[str, list[list[str]]]:
    """Each generation's rule starts as kept (``Generation.rule_starts``); none where the entry is not of that shape."""
    if not isinstance(kept, dict):
        return {}
    for starts in kept.values():
        if not isinstance(starts, list) or not all(
            isinstance(begins, list) and all(isinstance(start, str) for start in begins) for begins in starts
        ):
            return {}
    return kept


def _documents_key(root: Path, paths: list[Path]) -> str | None:
    """The key of the step files' parsed TOML in ``kvlog.schema.stored``: every file's name and bytes.

    Parsing them is the same work each run (TOML is read by the Python of the key); None when a file
    cannot be read, which the loop then reports in its turn.
    """
    if stored.directory() is None:
        return None
    try:
        return stored.digest(
            [part for path in paths for part in (str(path.relative_to(root)).encode(), path.read_bytes())]
        )
    except OSError:
        return None


def _read(path: Path) -> dict[str, Any]:
    import tomllib  # noqa: PLC0415 - most runs read the parsed files back from kvlog.schema.stored

    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MigrationError(f"{path}: cannot read: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise MigrationError(f"{path}: invalid TOML: {exc}") from None


def _check_keys(document: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = set(document) - allowed
    if unknown:
        raise OpError(f"unknown key(s) {', '.join(sorted(unknown))} (allowed: {', '.join(sorted(allowed))})")


def _json_object(text: Any, what: str) -> dict[str, Any]:
    if not isinstance(text, str):
        raise OpError(f"{what} must be a JSON object written as a string")
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise OpError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise OpError(f"{what} must be a JSON object")
    return value


def _examples(document: Mapping[str, Any], source_key: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    tables = document.get("examples", [])
    if not isinstance(tables, list) or not tables:
        raise OpError("every step declares at least one [[examples]] (input and expected output)")
    out: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for number, table in enumerate(tables, 1):
        if not isinstance(table, dict):
            raise OpError(f"example {number} must be a table")
        if source_key == "line":
            if not isinstance(table.get("line"), str):
                raise OpError(f"example {number} needs a string 'line'")
            out.append(({"line": table["line"]}, _json_object(table.get("event"), f"example {number} event")))
        else:
            given = _json_object(table.get("input"), f"example {number} input")
            out.append((given, _json_object(table.get("output"), f"example {number} output")))
    return out


def _event_step(path: Path, relative: Path, document: dict[str, Any], catalog: Catalog) -> Step:
    _check_keys(document, {"description", "event", "from_version", "to_version", "invertible", "ops", "examples"})
    match = _EVENT_STEP_FILE.match(relative.name)
    if match is None:
        raise OpError("an event step file is named v<from>-to-v<to>.toml")
    event, from_version, to_version = relative.parts[0], int(match.group(1)), int(match.group(2))
    declared = (document.get("event"), document.get("from_version"), document.get("to_version"))
    if declared != (event, from_version, to_version):
        raise OpError(f"declares {declared}, but its path says {(event, from_version, to_version)}")
    if from_version == to_version:
        raise OpError("a step must change the version")
    for version in (from_version, to_version):
        catalog.schema(event, version)
    invertible = document.get("invertible")
    if not isinstance(invertible, bool):
        raise OpError("invertible must be true or false: does the step keep every field of its input?")
    specs = document.get("ops", [])
    if not isinstance(specs, list) or not all(isinstance(spec, dict) for spec in specs):
        raise OpError("ops must be an array of tables ([[ops]])")
    ops = [compile_op(spec) for spec in specs]
    _check_fields(ops, catalog, event, from_version, to_version)
    if invertible and any(op.drops or op.kind == "hook" for op in ops):
        raise OpError("a step that drops fields (or runs a hook) cannot declare itself invertible")
    step_id = f"{event}/{relative.stem}"

    def run(given: dict[str, Any]) -> dict[str, Any]:
        if given.get("event") != event or given.get("schema_version") != from_version:
            raise ApplyError(f"expects {event}@{from_version}, got {given.get('event')}@{given.get('schema_version')}")
        result = jsonline.copy(given)  # numbers keeping their source text keep it
        provenance(result).setdefault("steps", []).append(step_id)  # kvlog migrate refused another provenance
        for op in ops:
            op.run(result)
        result["schema_version"] = to_version
        return result  # type: ignore[no-any-return]

    return Step(
        id=step_id,
        path=path,
        event=event,
        source=f"{event}@{from_version}",
        target=f"{event}@{to_version}",
        from_version=from_version,
        to_version=to_version,
        invertible=invertible,
        examples=_examples(document, "input"),
        _run=run,
        ops=tuple(ops),
    )


def _check_fields(ops: list[Op], catalog: Catalog, event: str, from_version: int, to_version: int) -> None:
    """Catch a misspelt field at load time: reads must exist before the step, writes after it."""
    before = set(catalog.schema(event, from_version)["properties"])
    after = set(catalog.schema(event, to_version)["properties"])
    present = set(before)
    for op in ops:
        missing = [name for name in op.reads if name not in present]
        if missing and op.kind != "hook":
            raise OpError(f"op {op.kind!r} reads {', '.join(missing)}, which {event}@{from_version} does not have")
        present |= set(op.writes)
        present -= set(op.drops)
        if op.kind == "rename":
            present -= set(op.reads)
    wrong = sorted(name for name in present if name not in after)
    if wrong:
        raise OpError(f"after the ops the event still has {', '.join(wrong)}, which {event}@{to_version} does not")


def _text_step(
    path: Path, relative: Path, document: dict[str, Any], catalog: Catalog, plans: Mapping[str, list[list[str]]]
) -> Step:
    _check_keys(
        document,
        {"description", "catalog_version", "wording", "current", "templates", "companions", "ops", "examples"},
    )
    if _GENERATION_FILE.match(relative.name) is None:
        raise OpError("a text generation file is named YYYY-MM[-tag].toml")
    generation_id = f"{relative.parts[0]}/{relative.stem}"
    generation = build_generation(generation_id, document, catalog, plans.get(generation_id))
    server_prefix = SERVERS[generation.server]

    def run(given: dict[str, Any]) -> dict[str, Any]:
        line = given.get("line")
        if not isinstance(line, str):
            raise ApplyError("a text step takes {'line': '<log line>'}")
        prefix = server_prefix.split(line)
        recognised = generation.recognise(prefix.message)
        if recognised is None or recognised.rule.role is not None:
            raise ApplyError(f"not an event line of {generation_id}: {line!r}")
        event = recognised.event(prefix)
        if prefix.partial is not None:
            complete(event, prefix.partial, DateContext())
        return event

    return Step(
        id=generation_id,
        path=path,
        event=None,
        source=generation_id,
        target=f"catalog@{generation.catalog_version}",
        from_version=None,
        to_version=generation.catalog_version,
        invertible=False,
        examples=_examples(document, "line"),
        generation=generation,
        _run=run,
    )
