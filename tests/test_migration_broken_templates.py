"""A generation file whose template cannot be read fails to load, naming the file and what is wrong.

An unknown unit or an unbalanced optional section, in an event template or a companion line, used to
escape ``load_chain`` as a bare ``KeyError``/``ValueError`` traceback; ``kvlog migrate --migrations``
now exits as for any broken migration file (exit 4), before anything is read or written.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_harness import kvlog_text
from migration_helpers import edited_migrations

from kvlog.commands import EXIT_BROKEN_MIGRATIONS
from kvlog.migration import load_chain
from kvlog.migration.errors import MigrationError

BROKEN = [
    pytest.param("K size: {k_bytes:gib2} GB", "K size: {k_bytes:gib9} GB", "unknown unit 'gib9'", id="event-unit"),
    pytest.param("K size: {k_bytes:gib2} GB", "K size: {[{k_bytes:gib2} GB", "unbalanced {[", id="event-section"),
    pytest.param(
        "KV cache dtype: {dtype}", "KV cache dtype: {dtype:bytes}", "unknown unit 'bytes'", id="companion-unit"
    ),
    pytest.param("KV cache dtype: {dtype}", "KV cache dtype: {dtype}]}", "unbalanced ]}", id="companion-section"),
]


@pytest.mark.parametrize(("old", "new", "message"), BROKEN)
def test_a_template_that_cannot_be_read_fails_to_load_naming_its_file(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    edited = edited_migrations(tmp_path, "sglang-text/2025-01.toml", old, new)
    with pytest.raises(MigrationError) as caught:
        load_chain(tmp_path / "migrations")
    assert str(edited) in str(caught.value)
    assert message in str(caught.value)


def test_migrate_with_such_a_file_exits_as_for_broken_migrations(tmp_path: Path) -> None:
    edited = edited_migrations(tmp_path, "sglang-text/2025-01.toml", "{k_bytes:gib2}", "{k_bytes:gib9}")
    (tmp_path / "in.log").write_text("a line\n")
    done = kvlog_text("migrate", "--migrations", tmp_path / "migrations", tmp_path / "in.log")
    assert done.returncode == EXIT_BROKEN_MIGRATIONS
    assert str(edited) in done.stderr
    assert "unknown unit 'gib9'" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
