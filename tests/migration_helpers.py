"""Migrating a few log lines as ``kvlog migrate`` and ``kvlog follow`` do, and copies of kvlog's migration
files with one step edited or broken, for the tests of what loading does."""

from __future__ import annotations

import io
import shutil
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import orjson
import pytest

from kvlog.io import jsonline
from kvlog.migration import Chain, load_chain
from kvlog.migration.engine import FileRun, MigrateOptions, Migrator
from kvlog.migration.records import Record
from kvlog.migration.report import MigrationReport
from kvlog.schema import stored

SHIPPED = Path(__file__).resolve().parent.parent / "migrations"


@cache
def shipped_chain() -> Chain:
    """kvlog's migration chain, loaded once for every test that migrates lines, as a user's runs load it.

    A user's second run finds each rule's starts kept (``kvlog.schema.stored``) and compiles a rule only
    when a line first needs it; the tests keep nothing (``conftest``), so this chain is loaded twice
    with a private cache, and the tests that migrate lines read them with the lazily compiled rules.
    """
    with tempfile.TemporaryDirectory(prefix="kvlog-kept-") as kept, pytest.MonkeyPatch.context() as patch:
        patch.setenv(stored.ENV, kept)
        load_chain()  # the first run: every rule compiled, their starts kept
        return load_chain()


def migrated(
    data: bytes, options: MigrateOptions | None = None, name: str = "ctx.log"
) -> tuple[bytes, MigrationReport, list[dict[str, Any]]]:
    """What ``kvlog migrate`` writes for the input ``data``, its report, and its dead letters."""
    out, dead = io.BytesIO(), []
    report = Migrator(shipped_chain(), options or MigrateOptions()).migrate(name, io.BytesIO(data), out, dead.append)
    return out.getvalue(), report, dead


def migrate(*lines: str) -> list[dict[str, Any] | bytes]:
    """What ``kvlog migrate`` writes for ``lines``: each output line, an event where it is one."""
    out, _, _ = migrated("".join(line + "\n" for line in lines).encode())
    result: list[dict[str, Any] | bytes] = []
    for line in out.split(b"\n")[:-1]:
        try:
            result.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            result.append(line)
    assert len(result) == len(lines)
    return result


def live(*lines: str) -> tuple[list[dict[str, Any]], int]:
    """What a follower has written of ``lines`` before their file ends: the events, and the lines written through."""
    taken = Taken()
    run = FileRun(
        Migrator(shipped_chain(), MigrateOptions()),
        "ctx.log",  # as migrate() names it: the two give the same events
        MigrationReport(files=1),
        None,
        taken,
    )
    run.feed("".join(f"{line}\n" for line in lines).encode())
    return [record.event for record in taken.records], run.written_lines


class Taken:
    """A ``FileRun``'s downstream that keeps what it is given: the bytes passed through, and the records."""

    def __init__(self) -> None:
        self.passed = io.BytesIO()
        self.records: list[Record] = []

    def passthrough(self, data: bytes | memoryview) -> None:
        self.passed.write(data)

    def record(self, record: Record) -> None:
        self.records.append(record)


def state(event: Any) -> tuple[str, str | None, int | None]:
    """A pool's ``allocation_state``, and the rule and evidence line of its inference (None: read from its line)."""
    inferred = event["migrated"].get("inferred", {}).get("allocation_state")
    return event["allocation_state"], inferred and inferred["rule"], inferred and inferred.get("evidence_line")


def committed(event: Any) -> tuple[int | None, str | None, int | None]:
    """A VA pool's ``committed_bytes``, and the rule and evidence line of its inference."""
    inferred = event["migrated"].get("inferred", {}).get("committed_bytes")
    return event["committed_bytes"], inferred and inferred["rule"], inferred and inferred.get("evidence_line")


def edited_migrations(directory: Path, relative: str, old: str, new: str) -> Path:
    """``directory/migrations``, kvlog's migrations with ``old`` replaced by ``new`` (once) in ``relative``.

    Returns the edited file, which load errors must name. ``old`` must be in it: an edit that changed
    nothing would make a test of a broken file pass on an intact one.
    """
    root = directory / "migrations"
    shutil.copytree(SHIPPED, root)
    path = root / relative
    text = path.read_text()
    assert old in text, f"{relative} has no {old!r}"
    path.write_text(text.replace(old, new, 1))
    return path


def too_deep_migrations(directory: Path) -> Path:
    """``directory/migrations`` whose kv_pool.allocation v1-to-v2 step sets ``ext`` deeper than JSON is written.

    ``migrate`` must dead-letter such an event (orjson refuses it), on every path that writes or takes records.
    """
    deep = "{" + '"a": ' + "[" * jsonline.MAX_DEPTH + "]" * jsonline.MAX_DEPTH + "}"
    return edited_migrations(
        directory,
        "kv_pool.allocation/v1-to-v2.toml",
        '[[ops]]\nop = "default"\nfield = "pool"',
        f'[[ops]]\nop = "set"\nfield = "ext"\nvalue = {{ json = \'{deep}\' }}\n\n'
        '[[ops]]\nop = "default"\nfield = "pool"',
    )


def broken_migrations(directory: Path) -> Path:
    """``directory/migrations``: kvlog's migrations, ``broken_step`` naming an op that does not exist."""
    root = directory / "migrations"
    shutil.copytree(SHIPPED, root)
    broken = broken_step(root)
    broken.write_text(broken.read_text().replace('op = "rename"', 'op = "renam"'))
    return root


def broken_step(root: Path) -> Path:
    """The step ``broken_migrations`` breaks (``kv_arena.ready`` v1 -> v2), which the errors name."""
    return root / "kv_arena.ready" / "v1-to-v2.toml"


#: a kv_pool.allocation event of schema version 1 (an MLA pool, no label), as old kvlog JSON logs hold it
POOL_V1: dict[str, Any] = {
    "event": "kv_pool.allocation",
    "schema_version": 1,
    "timestamp": "2026-07-21T09:02:11Z",
    "level": "info",
    "ranks": {"tp": 0},
    "label": None,
    "layout": "mla",
    "dtype": None,
    "num_tokens": 1,
    "kv_bytes": 1 << 29,
}

#: a kv_arena.ready event of schema version 1 (no ranks), as old kvlog JSON logs hold it
READY_V1: dict[str, Any] = {
    "event": "kv_arena.ready",
    "schema_version": 1,
    "timestamp": "2026-07-20T10:00:00Z",
    "level": "info",
    "arena_id": "0",
    "device": 0,
    "reserved_bytes": 21582210662,
    "granularity_bytes": 2097152,
}
