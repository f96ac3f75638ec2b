"""Emitting events: one structlog pipeline, configured once, that validates what it logs.

The chain is: envelope (version, timestamp, level, pid, ranks, in ``kvlog.envelope``'s order, which
migrated events have too) -> validation -> renderer, which also feeds the taps (test capture) with
exactly what it wrote. Outside ``raise`` mode nothing in the write path raises into the caller:
whatever fails loses that one event, is said once on stderr and counted (``lost_events()``).

The package is laid out along structlog's lines, one job a module; the lower a module in this list,
the less it knows (an import-linter contract in ``pyproject.toml`` keeps the order):

- ``_config``: ``configure``, ``get_config``/``restore``, and ``emit``/``get_logger`` on what is in force.
- ``_pipeline``: the guard around the chain, and ``emit()``'s direct drive of it.
- ``_stdlib``: the bridge to ``logging`` (``stdlib=True``, ``formatter()``).
- ``_output``: the stream writer, and which renderer a stream takes.
- ``_processors``: envelope, validation and the finisher (render, then taps).
- ``_render``: JSON and console renderers.
- ``_taps``, ``_context`` (bound ranks), ``_losses`` (the failure policy), ``_levels``, ``_forks``
  (what a forked child re-creates).

This ``__init__`` is the public surface: the names below, and the types and taps other kvlog
modules use.
"""

from __future__ import annotations

from kvlog.emission._config import EmissionConfig, configure, emit, get_config, get_logger, lost_events, restore
from kvlog.emission._context import bind_ranks
from kvlog.emission._levels import LEVELS as LEVELS
from kvlog.emission._levels import LogLevel as LogLevel
from kvlog.emission._processors import VIOLATION_EVENT as VIOLATION_EVENT
from kvlog.emission._processors import ValidationMode as ValidationMode
from kvlog.emission._render import Output as Output
from kvlog.emission._stdlib import formatter
from kvlog.emission._taps import add_tap as add_tap
from kvlog.emission._taps import remove_tap as remove_tap

__all__ = [
    "EmissionConfig",
    "bind_ranks",
    "configure",
    "emit",
    "formatter",
    "get_config",
    "get_logger",
    "lost_events",
    "restore",
]
