"""Running the processor chain: the guard every way into it shares, and ``emit()``'s direct drive of it.

``emit()`` drives the chain itself (all but the first step, which adds the envelope to a typed event
more cheaply), without structlog's per-call context copying, which keeps an emitted, validated event
cheaper than the f-string line it replaces (see BENCHMARKS.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog
from structlog.typing import Processor, WrappedLogger

from kvlog.emission._levels import LEVELS, NUMBERS, LogLevel
from kvlog.emission._losses import Losses
from kvlog.event_base import Event


class Guarded:
    """The processor chain run as one step that, unless strict, turns any failure into a lost event.

    ``emit()`` and the structlog logger both run it, so every way into the pipeline has the same guard;
    a processor's ``DropEvent`` (a deliberate drop) is not a failure.
    """

    def __init__(self, processors: list[Processor], losses: Losses) -> None:
        self.processors = processors
        self.losses = losses

    def __call__(self, logger: WrappedLogger, method: str, event_dict: Any) -> Any:
        try:
            for processor in self.processors:
                event_dict = processor(logger, method, event_dict)
        except Exception as exc:  # noqa: BLE001 - raised again when strict (Losses.failed)
            self.losses.failed(exc)
            raise structlog.DropEvent from None
        return event_dict


class Emitter:
    """Runs a typed event through the processor chain and hands the result to the output.

    The chain structlog runs for ``get_logger()`` calls, after the envelope; driving it directly skips
    the bound logger's context copy and keyword re-packing, the largest cost left on the emission path.
    Its three steps (envelope, validation, rendering) are called one after the other, under the
    guard ``Guarded`` puts around them (a failure raised when strict, else one lost event), rather
    than by ``Guarded``'s loop: a server pays for each call on its hot path.
    """

    def __init__(self, pipeline: Guarded, target: Any, threshold: int, *, stdlib: bool) -> None:
        self.pipeline = pipeline
        stamp, validate, finish = pipeline.processors
        self.envelope: Callable[..., Any] = stamp
        self.validate: Callable[..., Any] = validate
        self.finish: Callable[..., Any] = finish
        self.losses = pipeline.losses
        self.target = target
        self.stdlib = stdlib
        self.enabled = {name: NUMBERS[name] >= threshold for name in LEVELS}

    def __call__(self, event: Event, level: LogLevel) -> None:
        if not self.enabled[level]:
            return
        target = self.target
        event_dict = event.to_dict()  # outside the guard, as before: a broken event raises into its maker
        try:
            rendered = self.finish(
                target, level, self.validate(target, level, self.envelope(target, level, event_dict))
            )
        except structlog.DropEvent:
            return
        except Exception as exc:  # noqa: BLE001 - raised again when strict (Losses.failed)
            self.losses.failed(exc)
            return
        if self.stdlib:
            args, _ = rendered
            getattr(target, level)(*args)
        else:
            target.msg(rendered)
