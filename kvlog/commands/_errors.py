"""Every exception the command functions raise of their own, in one module."""

from __future__ import annotations

from kvlog.commands import EXIT_BROKEN_MIGRATIONS
from kvlog.migration.errors import MigrationError


class BrokenMigrations(MigrationError):
    """The migration files cannot be loaded; nothing was read or written."""

    exit_status = EXIT_BROKEN_MIGRATIONS


__all__ = ["BrokenMigrations"]
