"""Helpers for the kvlog check tests: ``kvlog.commands.check``, the CLI in process, real git repositories."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from cli_harness import kvlog_text as kvlog  # noqa: F401 - the check tests' kvlog(), in process

from kvlog import commands
from kvlog.check.rendering import Format, format_report
from kvlog.schema.resources import data_dir

GIT_ENV = {
    "GIT_AUTHOR_NAME": "kvlog tests",
    "GIT_AUTHOR_EMAIL": "tests@kvlog.invalid",
    "GIT_COMMITTER_NAME": "kvlog tests",
    "GIT_COMMITTER_EMAIL": "tests@kvlog.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def checked(cwd: Path, path: str | None = None, **options: Any) -> tuple[int, list[dict[str, Any]]]:
    """``kvlog check [PATH] --format json`` in ``cwd``, run in this process: (exit status, the findings)."""
    status, text, _ = checked_as(cwd, "json", path, **options)
    return status, json.loads(text)


def checked_as(cwd: Path, output_format: Format, path: str | None = None, **options: Any) -> tuple[int, str, str]:
    """``kvlog check [PATH] --format FORMAT`` in ``cwd``, in this process: (exit status, report, status line)."""
    with contextlib.chdir(cwd):
        outcome = commands.check(path, **options)
    return outcome.exit_status, format_report(outcome.report, output_format), outcome.status_line


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    done = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True)
    return done.stdout


def commit_all(repo: Path, message: str) -> None:
    """Stage every top-level entry by name (deletions under them included) and commit."""
    git(repo, "add", "--", *sorted(p.name for p in repo.iterdir() if p.name != ".git"))
    git(repo, "commit", "-q", "-m", message)


def project_repo(tmp_path: Path) -> Path:
    """A git repository holding a copy of kvlog's shipped catalog and migrations, committed once."""
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copytree(data_dir("schemas"), repo / "schemas")
    shutil.copytree(data_dir("migrations"), repo / "migrations")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "catalog as shipped")
    return repo


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def write_json(path: Path, document: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")


ACME_BASE = "https://acme.example/telemetry/"


def acme_schema(version: int, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """An event of a user's own catalog (not kvlog's), with the envelope fields an event needs."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"{ACME_BASE}acme.alloc/v{version}.json",
        "title": f"acme allocation (v{version})",
        "type": "object",
        "properties": {
            "event": {"const": "acme.alloc"},
            "schema_version": {"const": version},
            "timestamp": {"type": "string"},
            "level": {"enum": ["debug", "info", "warning", "error", "critical"]},
            "migrated": {"type": "object"},
            **properties,
        },
        "required": ["event", "schema_version", "timestamp", "level", *required],
        "additionalProperties": False,
    }


ACME_V1 = {"reserved_bytes": {"$ref": "../_common.json#/$defs/bytes"}, "pool_state": {"enum": ["reserved", "backed"]}}


def acme_project(root: Path) -> Path:
    """A user's project: a catalog under telemetry/ named by pyproject's [tool.kvlog], v1 of one event."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(
        '[project]\nname = "acme"\n\n[tool.kvlog]\nschemas = "telemetry/schemas"\nmigrations = "telemetry/migrations"\n'
    )
    schemas = root / "telemetry" / "schemas"
    write_json(
        schemas / "_common.json",
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"{ACME_BASE}_common.json",
            "$defs": {"bytes": {"type": "integer", "minimum": 0}},
        },
    )
    write_json(schemas / "acme.alloc" / "v1.json", acme_schema(1, ACME_V1, ["reserved_bytes", "pool_state"]))
    (root / "telemetry" / "migrations" / "acme.alloc").mkdir(parents=True)
    return root


def acme_event(version: int, **fields: Any) -> str:
    head = {"event": "acme.alloc", "schema_version": version, "timestamp": "2026-12-01T00:00:00Z", "level": "info"}
    return json.dumps({**head, **fields})


def acme_rename_migrations(root: Path, invertible: bool = True) -> None:
    """acme.alloc v1 <-> v2: reserved_bytes is renamed reserved_va_bytes, both ways."""
    directory = root / "telemetry" / "migrations" / "acme.alloc"
    provenance_up = {"source_format": "kvlog-json/v1", "steps": ["acme.alloc/v1-to-v2"]}
    provenance_down = {"source_format": "kvlog-json/v2", "steps": ["acme.alloc/v2-to-v1"]}
    for a, b, old, new, provenance in (
        (1, 2, "reserved_bytes", "reserved_va_bytes", provenance_up),
        (2, 1, "reserved_va_bytes", "reserved_bytes", provenance_down),
    ):
        given = acme_event(a, **{old: 4096, "pool_state": "reserved"})
        expected = acme_event(b, **{new: 4096, "pool_state": "reserved", "migrated": provenance})
        (directory / f"v{a}-to-v{b}.toml").write_text(
            f'event = "acme.alloc"\nfrom_version = {a}\nto_version = {b}\ninvertible = {str(invertible).lower()}\n\n'
            f'[[ops]]\nop = "rename"\nfrom = "{old}"\nto = "{new}"\n\n'
            f"[[examples]]\ninput = '{given}'\noutput = '{expected}'\n"
        )
