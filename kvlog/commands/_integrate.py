"""``integrate``: the logging configuration that makes a running sglang or vLLM emit typed events."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from kvlog.errors import OptionError
from kvlog.follow.holding import HOLD_S
from kvlog.integrate import LIVE_SERVERS, configuration
from kvlog.integrate.budget import MAX_HELD_BYTES, MIN_HELD_BYTES
from kvlog.integrate.dictconfig import EVENTS
from kvlog.io.errors import InputError
from kvlog.migration.sampling import USAGE_MODES


def integrate(
    server: str,
    *,
    events: str = EVENTS,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    hold_s: float = HOLD_S,
    max_held_bytes: int = MAX_HELD_BYTES,
    usage: str = "none",
    nvml: bool = False,
    keep: str | Path | None = None,
) -> dict[str, Any]:
    """The ``dictConfig`` document ``server`` loads (from ``SGLANG_LOGGING_CONFIG_PATH``, ``VLLM_LOGGING_CONFIG_PATH``).

    ``events`` is where each process writes its events (``{pid}``, ``{rank}`` filled in by the process;
    a relative path is made absolute here, since the server may run elsewhere; ``-``: standard error).
    ``max_held_bytes`` bounds what each process's handler holds (its queue and look-ahead; the records
    beyond it are dropped and counted). ``usage`` says which periodic usage lines become ``kv_pool.usage``
    events and gauges (``none``, ``sampled``, ``all``). ``nvml`` makes each process sample its device
    memory through NVML at each memory record (the ``nvml`` extra, in the server's environment; without
    it the process says so once and writes its events without measurements). ``keep`` names a
    configuration the user already has, which kvlog's handler is merged into instead of the server's
    default. Raises ``OptionError`` for options
    that cannot work, ``InputError`` for a ``keep`` file that cannot be read, and ``ConfigurationError``
    for one kvlog cannot merge into.
    """
    if server not in LIVE_SERVERS:
        raise OptionError("{server} {given}: kvlog integrates {known}", given=server, known=" and ".join(LIVE_SERVERS))
    if metrics_port is not None and not 0 <= metrics_port <= 65535:
        raise OptionError("{metrics_port} {given}: a TCP port is 0..65535", given=metrics_port)
    if not 0 < hold_s < math.inf:
        raise OptionError("{hold_s} {given}: the look-ahead needs some time, and a bound", given=hold_s)
    if max_held_bytes < MIN_HELD_BYTES:
        raise OptionError(
            "{max_held_bytes} {given}: the handler needs at least {least} bytes (a record of the longest line read)",
            given=max_held_bytes,
            least=MIN_HELD_BYTES,
        )
    if usage not in USAGE_MODES:
        raise OptionError("{usage} {given}: one of {known}", given=usage, known=", ".join(USAGE_MODES))
    if events != "-":
        events = os.path.abspath(events)  # noqa: PTH100 - a str with placeholders in, a str out
    kept = None if keep is None else _read_config(Path(keep))
    return configuration(
        server,
        events=events,
        metrics_port=metrics_port,
        metrics_host=metrics_host,
        hold_s=hold_s,
        max_held_bytes=max_held_bytes,
        usage=usage,
        nvml=nvml,
        keep=kept,
        keep_name=str(keep),
    )


def _read_config(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a JSON logging configuration: {exc}") from None
    if not isinstance(document, dict):
        raise InputError(f"{path}: not a JSON logging configuration: the document is not an object")
    return document
