"""The migration layer: old sglang text and old event versions, carried to the current catalog.

A chain of declarative, versioned steps leads from every old text format to the catalog and between
event versions (up, and down where that is possible); the engine behind ``kvlog migrate`` applies it.

The stable API, also used by ``kvlog check``: ``load_chain`` reads every step file; a ``Chain`` lists
its ``steps`` and finds the ``path`` between two versions of an event; each ``Step`` can ``apply``
itself and carries the ``examples`` it promises to satisfy. The engine hands each event on as a
``Record`` (the event, its line, its raw bytes, the source format and version it was read from).
"""

from __future__ import annotations

from kvlog.migration.errors import MigrationError
from kvlog.migration.records import Record
from kvlog.migration.steps import Chain, Step, load_chain

__all__ = ["Chain", "MigrationError", "Record", "Step", "load_chain"]
