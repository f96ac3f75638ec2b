"""Exceptions kvlog raises to its callers; each carries enough context to act on."""

from __future__ import annotations


class KvlogError(Exception):
    """Base class of every error kvlog raises on purpose."""


class CatalogError(KvlogError):
    """A schema file is missing, unreadable or inconsistent; the message names the file."""


class UnknownEventError(KvlogError):
    """An event name or version that the catalog does not define."""


class SchemaViolationError(KvlogError):
    """An emitted event failed validation while validation mode is ``raise``."""

    def __init__(self, event: str | None, version: object, errors: list[tuple[str, str]]) -> None:
        self.event = event
        self.version = version
        self.errors = errors
        detail = "; ".join(f"{path}: {message}" for path, message in errors)
        super().__init__(f"{event}@{version}: {detail}")
