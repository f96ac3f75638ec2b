"""The configuration in force: ``configure`` builds the pipeline, ``emit`` and ``get_logger`` use it.

kvlog builds its own structlog logger rather than reconfiguring structlog globally, so an
application that uses structlog for its own logs keeps its configuration. As structlog's
``_config``, this is where the pieces are put together; none of them imports it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import IO, Any

import structlog
from structlog.typing import Processor

from kvlog.emission._levels import LogLevel, threshold
from kvlog.emission._losses import Losses
from kvlog.emission._output import LineWriter, target
from kvlog.emission._pipeline import Emitter, Guarded
from kvlog.emission._processors import CallerEnvelope, Finisher, ValidationMode, ValidationProcessor, typed_envelope
from kvlog.emission._render import Output, json_text
from kvlog.emission._stdlib import StdlibWriter
from kvlog.event_base import Event
from kvlog.schema.catalog import Catalog
from kvlog.schema.event_validator import EventValidator


@dataclass(frozen=True, slots=True, eq=False)
class EmissionConfig:
    """One setup of the pipeline: what ``configure`` was given, and what it built from that.

    ``get_config()`` returns the setup in force and ``restore()`` puts one back, as structlog's
    ``get_config()`` and ``configure()`` do, so that a test or a tool that reconfigures kvlog for a
    while leaves the process as it found it. Restoring puts back that very pipeline (its stream, its
    compiled validators, its count of lost events), not a new one built from the same arguments;
    two configurations are equal only if they are the same one.
    """

    output: Output = "json"
    validation: ValidationMode = "warn"
    stream: IO[str] | IO[bytes] | None = None
    stdlib: bool = False
    level: LogLevel = "debug"
    catalog: Catalog | None = None
    _logger: Any = field(default=None, repr=False)
    _emitter: Emitter | None = field(default=None, repr=False)
    _losses: Losses | None = field(default=None, repr=False)

    @property
    def configured(self) -> bool:
        """False before the first ``configure()``: the first event then configures the defaults."""
        return self._emitter is not None


class _State:
    """The configuration in force, replaced whole (one attribute), read by ``emit`` on every event."""

    def __init__(self) -> None:
        self.config = EmissionConfig()


_state = _State()


def configure(
    *,
    output: Output = "json",
    validation: ValidationMode = "warn",
    stream: IO[str] | IO[bytes] | None = None,
    stdlib: bool = False,
    level: LogLevel = "debug",
    catalog: Catalog | None = None,
) -> None:
    """Set up kvlog's structlog pipeline; calling it again replaces the previous setup.

    ``output`` picks JSON lines (for machines) or sglang-style lines (for people); ``validation``
    picks what happens to an invalid event: ``raise`` in tests, ``warn`` (default) in production.
    With ``stdlib=True`` events go to the ``logging`` logger ``"kvlog"`` instead of ``stream``; give
    its handlers ``kvlog.formatter(...)`` so each line is rendered once with one timestamp.
    """
    validator = EventValidator(catalog)
    latest = {name: validator.catalog.latest(name) for name in validator.catalog.events()}
    validating = ValidationProcessor(validation, validator)
    losses = Losses(strict=validation == "raise")
    chain: list[Processor] = [validating]  # after the envelope, which emit() and structlog callers add apart
    least = threshold(level)
    writer: LineWriter | StdlibWriter
    if stdlib:
        chain.append(Finisher(validating, json_text, for_handlers=True))
        writer = StdlibWriter.to_kvlog(least, losses)
    else:
        owner = stream if stream is not None else sys.stderr
        writable, renderer = target(owner, output)
        chain.append(Finisher(validating, renderer))
        writer = LineWriter(writable, owner, losses)
    logged = Guarded([CallerEnvelope(latest), *chain], losses)
    logger = structlog.wrap_logger(
        writer, processors=[logged], wrapper_class=structlog.make_filtering_bound_logger(least)
    ).bind()
    emitter = Emitter(Guarded([typed_envelope, *chain], losses), writer, least, stdlib=stdlib)
    _state.config = EmissionConfig(
        output, validation, stream, stdlib, level, catalog, _logger=logger, _emitter=emitter, _losses=losses
    )


def get_config() -> EmissionConfig:
    """The configuration in force, to give back to ``restore()`` later."""
    return _state.config


def restore(config: EmissionConfig) -> None:
    """Put back a configuration ``get_config()`` returned: the same pipeline, writing where it wrote.

    A configuration from before the first ``configure()`` puts kvlog back to unconfigured: the next
    event configures the defaults again.
    """
    _state.config = config


def get_logger(**initial: Any) -> Any:
    """The structlog logger kvlog events go through (configured with defaults on first use)."""
    if _state.config._logger is None:
        configure()
    logger = _state.config._logger
    return logger.bind(**initial) if initial else logger


def emit(event: Event, level: LogLevel = "info") -> None:
    """Log a typed catalog event at ``level``."""
    emitter = _state.config._emitter
    if emitter is None:
        configure()
        emitter = _state.config._emitter
        assert emitter is not None
    emitter(event, level)


def lost_events() -> int:
    """Events lost since the last ``configure`` because writing them failed (never raised, outside ``raise``)."""
    losses = _state.config._losses
    return losses.count if losses is not None else 0
