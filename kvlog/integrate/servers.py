"""What the live handler knows of each server's logging: where its default goes, and whose ranks a record has.

Both servers load a ``logging.config.dictConfig`` file named by an environment variable *instead of*
their default configuration. kvlog's configuration gives the text output back unchanged by running
the server's own default, from the very call that is loading it: the handler factory is called inside
the server's configure function, finds that function's frame, and calls it again with the variable
hidden. So every release's format, level, stream and side effects (sglang's quieter httpx, vLLM's
record factory) are the release's own, and no table of formats has to follow them.

- sglang (0.4.6.post3 on): ``configure_logger(server_args, prefix)`` in ``sglang/srt/utils`` reads
  ``SGLANG_LOGGING_CONFIG_PATH`` on every call; its ``prefix`` (`` DP1 TP1 EP1``) is the process's ranks.
- vLLM: ``_configure_vllm_root_logger`` in ``vllm/logger.py``, with its ``LoggingConfig`` (0.2x on,
  called again without the file) or ``VLLM_LOGGING_CONFIG_PATH`` (re-read on each call where the release
  reads it through ``vllm.envs``; a release that kept the path from import time, such as 0.11, gets its
  ``DEFAULT_LOGGING_CONFIG`` applied instead, which is what it would have applied). The ranks are in the
  process name a record carries (``EngineCore_DP0``, ``Worker_PP1_TP3``). vLLM's API server also hands
  the file to uvicorn as its ``log_config`` (``get_uvicorn_log_config``, 0.2x on), in place of uvicorn's
  ``LOGGING_CONFIG``: there the factory applies that default and adds nothing (uvicorn logs no memory).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import logging.config
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any

from kvlog.text.prefix import sglang_ranks, vllm_process_ranks

#: how far up the stack the server's configure function may be from the handler factory (dictConfig's own frames)
_FRAMES = 64


class _Configuring(threading.local):
    """Set while kvlog runs a server's default configuration: the same file loaded again must add nothing."""

    active = False
    #: the server's function loaded kvlog's file again (it could not be made to forget the path)
    reloaded = False


configuring = _Configuring()


def _frame_of(function: str, module: str | None = None) -> FrameType | None:
    """The nearest frame up the stack of ``function`` (in ``module``, when given)."""
    frame: FrameType | None = sys._getframe(1)
    for _ in range(_FRAMES):
        if frame is None:
            return None
        if frame.f_code.co_name == function and module in (None, frame.f_globals.get("__name__")):
            return frame
        frame = frame.f_back
    return None


@dataclass(frozen=True)
class Companion:
    """A library a server hands the same configuration file to, whose own default the file then replaces."""

    module: str
    function: str
    #: applies the library's default configuration from the frame of its configure function
    run_default: Callable[[FrameType], None]

    def configuring_frame(self) -> FrameType | None:
        """The frame of the library's configure function, when the factory is called inside it."""
        return _frame_of(self.function, self.module)


def _run_uvicorn_default(frame: FrameType) -> None:
    """What ``uvicorn.Config.configure_logging`` does with its default ``log_config`` (before its levels)."""
    config = copy.deepcopy(frame.f_globals["LOGGING_CONFIG"])
    colors = getattr(frame.f_locals.get("self"), "use_colors", None)
    if colors in (True, False):
        config["formatters"]["default"]["use_colors"] = config["formatters"]["access"]["use_colors"] = colors
    logging.config.dictConfig(config)


UVICORN = Companion("uvicorn.config", "configure_logging", _run_uvicorn_default)


@dataclass(frozen=True)
class LiveServer:
    """One server's logging, as the handler meets it inside the server's own configure call."""

    name: str
    #: the environment variable that names a logging configuration file
    variable: str
    #: the function that loads that file
    function: str
    #: the logger the server's default handler is on ("" for the root logger), where kvlog's handler goes too
    logger: str
    #: runs the server's default configuration from the frame of its configure function
    run_default: Callable[[LiveServer, FrameType], None]
    #: the ranks of the configuring process, when the server says them at configuration (sglang's prefix)
    process_ranks: Callable[[FrameType | None], dict[str, int] | None]
    #: otherwise, the ranks a record's process name carries (vLLM's ``EngineCore_DP0``)
    record_ranks: Callable[[str], dict[str, int]]
    #: libraries the server hands the same file to
    companions: tuple[Companion, ...] = ()

    def configuring_frame(self) -> FrameType | None:
        """The frame of the server's configure function, when the handler is made inside it."""
        return _frame_of(self.function)


@contextmanager
def _hidden(variable: str) -> Iterator[None]:
    """The environment without ``variable`` for the length of the block (child processes started later keep it)."""
    value = os.environ.pop(variable, None)
    try:
        yield
    finally:
        if value is not None:
            os.environ[variable] = value


def _run_sglang_default(server: LiveServer, frame: FrameType) -> None:
    configure = frame.f_globals[server.function]
    with _hidden(server.variable):
        configure(frame.f_locals["server_args"], frame.f_locals.get("prefix", ""))


def _run_vllm_default(server: LiveServer, frame: FrameType) -> None:
    configure = frame.f_globals[server.function]
    config: Any = frame.f_locals.get("config")
    configuring.reloaded = False
    if dataclasses.is_dataclass(config) and not isinstance(config, type) and hasattr(config, "pylogging_config_file"):
        configure(dataclasses.replace(config, pylogging_config_file=None))
    else:
        with _hidden(server.variable):
            configure()
    if configuring.reloaded:
        logging.config.dictConfig(copy.deepcopy(frame.f_globals["DEFAULT_LOGGING_CONFIG"]))


def _sglang_ranks(frame: FrameType | None) -> dict[str, int] | None:
    prefix = frame.f_locals.get("prefix", "") if frame is not None else ""
    return sglang_ranks(prefix) if isinstance(prefix, str) else {}


def _no_process_ranks(_frame: FrameType | None) -> dict[str, int] | None:
    return None


def _no_record_ranks(_process_name: str) -> dict[str, int]:
    return {}  # sglang's ranks are its processes' (``process_ranks``), never a record's


SGLANG = LiveServer(
    "sglang",
    "SGLANG_LOGGING_CONFIG_PATH",
    "configure_logger",
    "",
    _run_sglang_default,
    _sglang_ranks,
    _no_record_ranks,
)
VLLM = LiveServer(
    "vllm",
    "VLLM_LOGGING_CONFIG_PATH",
    "_configure_vllm_root_logger",
    "vllm",
    _run_vllm_default,
    _no_process_ranks,
    vllm_process_ranks,
    (UVICORN,),
)
LIVE_SERVERS = {server.name: server for server in (SGLANG, VLLM)}
