"""Rules on the migration chain: it is complete, its steps do what their examples say, inverses invert."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from kvlog.check.errors import Refused
from kvlog.check.evolution import Cover
from kvlog.check.files import MAX_DEPTH, depth, entries, read_file
from kvlog.check.findings import Finding
from kvlog.check.jsondiff import MISSING, diff, show
from kvlog.check.snapshot import Snapshot, display_path
from kvlog.migration import Chain, MigrationError, Step, load_chain
from kvlog.schema.catalog import Catalog
from kvlog.schema.event_validator import EventValidator


def load(directory: Path | None, catalog: Catalog, root: Path) -> tuple[Chain | None, list[Finding]]:
    """The chain under ``directory`` against ``catalog`` (empty when there is no directory), or why not.

    The loader reads every ``*.toml`` by name, so each is screened first (``kvlog.check.files``): a
    link out of the project ``root``, a FIFO or a huge file is a finding and the chain is not loaded.
    """
    if directory is None:
        return Chain([], catalog), []
    refused = [
        Finding("KV301", reason, display_path(path))
        for path in entries(directory, lambda name: name.endswith(".toml"))
        if (reason := _unreadable(path, root)) is not None
    ]
    if refused:
        return None, refused
    try:
        return load_chain(directory, catalog), []
    except MigrationError as exc:
        file, message = _split_file(str(exc))
        return None, [Finding("KV301", message, file)]
    except Exception as exc:  # noqa: BLE001 - the loader runs on a pull request's files: any failure is a finding
        return None, [Finding("KV301", f"cannot be loaded: {type(exc).__name__}: {exc}", display_path(directory))]


def _unreadable(path: Path, root: Path) -> str | None:
    """Why the step file ``path`` must not be given to the loader, or None."""
    try:
        tomllib.loads(read_file(path, root).decode())
    except Refused as exc:
        return str(exc)
    except RecursionError:
        return "nested too deeply to read"
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None  # the loader says what is wrong with it
    return None


def _split_file(message: str) -> tuple[str | None, str]:
    """Pull the file a ``MigrationError`` names (its messages start ``<path>: ``) out into the finding's file."""
    head, sep, rest = message.partition(": ")
    if sep and Path(head).is_file():
        return display_path(Path(head)), rest
    return None, message


def describe_steps(steps: list[Step]) -> str:
    """``migration a (file), then b (file)``: what a report names as covering a change."""
    return "migration " + ", then ".join(f"{step.id} ({display_path(step.path)})" for step in steps)


def coverage(chain: Chain | None) -> Cover:
    """How events of one version reach another through ``chain``: upgrades for old data, downgrades for old readers."""

    def cover(event: str, from_version: int, to_version: int) -> str | None:
        if chain is None:
            return None
        try:
            return describe_steps(chain.path(event, from_version, to_version))
        except MigrationError:
            return None

    return cover


def check_complete(chain: Chain, snapshot: Snapshot) -> list[Finding]:
    """Every older version of every event, and every event a text format writes, reaches the latest version."""
    findings: list[Finding] = []
    for event, versions in sorted(snapshot.versions.items()):
        latest = max(versions)
        for version in sorted(versions)[:-1]:
            if not _reaches(chain, event, version, latest):
                furthest = max(v for v in range(version, latest) if _reaches(chain, event, version, v))
                message = (
                    f"{event}@{version} cannot be migrated to the latest version v{latest}: "
                    f"no chain of migrations leads there (e.g. add {event}/v{furthest}-to-v{furthest + 1}.toml)"
                )
                findings.append(Finding("KV302", message, versions[version].display))
    for step in chain.steps:
        if step.generation is None:
            continue
        for template, version in step.generation.templates():
            latest_of = snapshot.versions.get(template.event)
            if latest_of is None:
                message = f"{step.id} writes {template.event}@{version}, which the catalog no longer defines"
                findings.append(Finding("KV304", message, display_path(step.path)))
            elif not _reaches(chain, template.event, version, max(latest_of)):
                message = (
                    f"{step.id} writes {template.event}@{version}, which cannot be migrated to the latest "
                    f"version v{max(latest_of)}"
                )
                findings.append(Finding("KV304", message, display_path(step.path)))
    return _unique(findings)


def _reaches(chain: Chain, event: str, from_version: int, to_version: int) -> bool:
    if from_version == to_version:
        return True
    try:
        chain.path(event, from_version, to_version)
    except MigrationError:
        return False
    return True


def check_examples(chain: Chain, validator: EventValidator) -> list[Finding]:
    """Each step turns each example input into its declared output; invertible steps give their input back."""
    findings: list[Finding] = []
    for step in chain.steps:
        file = display_path(step.path)
        text = _read_text(step.path)
        for number, (given, expected) in enumerate(step.examples, 1):
            line = _example_line(text, number)
            where = f"{step.id} example {number}"
            nesting = max(depth(given), depth(expected))
            if nesting > MAX_DEPTH:
                message = f"{where} is nested {nesting} levels deep; an example may nest {MAX_DEPTH}"
                findings.append(Finding("KV401", message, file, line))
                continue
            if step.event is not None:
                findings += _invalid(validator, given, f"{where} input", file, line)
            findings += _invalid(validator, expected, f"{where} output", file, line)
            try:
                actual = step.apply(given)
            except MigrationError as exc:
                findings.append(Finding("KV401", f"{where}: {exc}", file, line))
                continue
            except Exception as exc:  # noqa: BLE001 - a pull request's step on its own example: a finding
                findings.append(Finding("KV401", f"{where} fails: {type(exc).__name__}: {exc}", file, line))
                continue
            changes = diff(expected, actual)
            if changes:
                detail = "; ".join(_expected_vs_actual(pointer, want, got) for pointer, want, got in changes)
                findings.append(Finding("KV401", f"{where} does not give its declared output: {detail}", file, line))
            elif step.invertible:
                problem = _round_trip(chain, step, given, actual)
                if problem is not None:
                    message = f"{where}: {step.id} is declared invertible, but the round trip changes it: {problem}"
                    findings.append(Finding("KV402", message, file, line))
    return findings


def _invalid(validator: EventValidator, event: dict[str, Any], what: str, file: str, line: int | None) -> list[Finding]:
    violations = validator.violations(event)
    if not violations:
        return []
    detail = "; ".join(f"{v.path}: {v.message}" for v in violations[:5])
    name = f"{event.get('event')}@{event.get('schema_version')}"
    return [Finding("KV403", f"{what} is not a valid {name} event: {detail}", file, line)]


def _round_trip(chain: Chain, step: Step, given: dict[str, Any], output: dict[str, Any]) -> str | None:
    """Invertible means no field is lost: going back down gives every field of the input its old value."""
    if step.event is None or step.from_version is None:
        return None
    try:
        back = output
        for inverse in chain.path(step.event, step.to_version, step.from_version):
            back = inverse.apply(back)
    except MigrationError as exc:
        return f"going back fails: {exc}"
    before, after = given.get("migrated", {}), back.get("migrated", {})
    fields = [name for name in given if name != "migrated"]
    changes = diff({k: given[k] for k in fields}, {k: back[k] for k in fields if k in back})
    bookkeeping = {"steps", "lost"}
    changes += [
        (("migrated", *pointer), old, new)
        for pointer, old, new in diff(
            {k: v for k, v in before.items() if k not in bookkeeping},
            {k: after[k] for k in before if k in after and k not in bookkeeping},
        )
    ]
    problems = [_expected_vs_actual(pointer, old, new) for pointer, old, new in changes]
    lost = [name for name in after.get("lost", []) if name in given]
    if lost:
        problems.append(f"the way back reports {', '.join(lost)} as lost")
    return "; ".join(problems) or None


def _expected_vs_actual(pointer: tuple[str, ...], expected: Any, actual: Any) -> str:
    where = "/".join(pointer)
    if actual is MISSING:
        return f"{where}: expected {show(expected)}, but it is missing"
    if expected is MISSING:
        return f"{where}: not expected, but got {show(actual)}"
    return f"{where}: expected {show(expected)}, got {show(actual)}"


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def _example_line(text: str, number: int) -> int | None:
    """The line of the ``number``-th ``[[examples]]`` table: where a failing example is written."""
    position = -1
    for _ in range(number):
        position = text.find("[[examples]]", position + 1)
        if position < 0:
            return None
    return text.count("\n", 0, position) + 1


def _unique(findings: list[Finding]) -> list[Finding]:
    return list(dict.fromkeys(findings))
