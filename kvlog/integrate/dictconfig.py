"""The ``dictConfig`` document ``kvlog integrate`` prints: the server's own logging, plus kvlog's handler.

Alone, the document holds one handler whose factory (``kvlog.integrate.handler_for``) runs the server's
default configuration from inside the server's call (see ``kvlog.integrate.servers``) and adds itself
beside the server's handler. Merged into a configuration the user already has (``--keep``), the
handler leaves the user's handlers alone and is attached where the server's records end: the root
logger (``root``, or the logger named ``""``), and every configured logger that does not propagate (a
record stops at the first of those, so each is read once).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvlog.follow.holding import HOLD_S
from kvlog.integrate.budget import MAX_HELD_BYTES
from kvlog.integrate.errors import ConfigurationError

#: the handler's name in the document (``--keep`` replaces one kvlog wrote before, and refuses any other)
HANDLER = "kvlog"
FACTORY = "kvlog.integrate.handler_for"
#: where each server process writes its events unless told (``--events``): ``{pid}`` filled in by the process
EVENTS = "kvlog-events-{pid}.jsonl"


def configuration(
    server: str,
    *,
    events: str,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    hold_s: float = HOLD_S,
    max_held_bytes: int = MAX_HELD_BYTES,
    usage: str = "none",
    nvml: bool = False,
    keep: Mapping[str, Any] | None = None,
    keep_name: str = "the configuration",
) -> dict[str, Any]:
    """The logging configuration for ``server`` (``sglang``, ``vllm``), alone or merged into ``keep``."""
    options: dict[str, Any] = {"()": FACTORY, "server": server, "events": events}
    if metrics_port is not None:
        options |= {"metrics_port": metrics_port, "metrics_host": metrics_host}
    if hold_s != HOLD_S:  # the factory's default: the document says only what differs
        options["hold_s"] = hold_s
    if max_held_bytes != MAX_HELD_BYTES:
        options["max_held_bytes"] = max_held_bytes
    if usage != "none":
        options["usage"] = usage
    if nvml:
        options["nvml"] = True
    if keep is None:
        return {"version": 1, "disable_existing_loggers": False, "handlers": {HANDLER: options}}
    return _merged(dict(keep), options | {"server_default": False}, keep_name)


def _merged(document: dict[str, Any], options: dict[str, Any], name: str) -> dict[str, Any]:
    if document.get("version") != 1:
        raise ConfigurationError(f'{name}: not a logging configuration (dictConfig needs "version": 1)')
    if document.get("incremental"):
        raise ConfigurationError(f"{name}: an incremental configuration cannot add a handler")
    handlers = dict(_section(document, "handlers", name))
    if HANDLER in handlers and handlers[HANDLER].get("()") != FACTORY:
        raise ConfigurationError(f"{name}: already has a handler named {HANDLER!r} that kvlog did not write")
    handlers[HANDLER] = options
    document["handlers"] = handlers
    loggers = {
        logger: _attached(config, name) if logger == "" or config.get("propagate", True) is False else config
        for logger, config in _section(document, "loggers", name).items()
    }
    if loggers:
        document["loggers"] = loggers
    if "" not in loggers or "root" in document:  # a logger named "" is the root: its handlers are the root's
        document["root"] = _attached(document.get("root", {}), name)
    return document


def _section(document: Mapping[str, Any], key: str, name: str) -> Mapping[str, Any]:
    section = document.get(key, {})
    if not isinstance(section, Mapping) or not all(isinstance(value, Mapping) for value in section.values()):
        raise ConfigurationError(f"{name}: {key!r} is not a mapping of names to configurations")
    return section


def _attached(logger: Mapping[str, Any], name: str) -> dict[str, Any]:
    if not isinstance(logger, Mapping):
        raise ConfigurationError(f"{name}: a logger's configuration is not a mapping")
    handlers = list(logger.get("handlers", []))
    return {**logger, "handlers": handlers if HANDLER in handlers else [*handlers, HANDLER]}
