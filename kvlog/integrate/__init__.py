"""``kvlog integrate``: typed events from a running sglang or vLLM, loaded through the server's logging config.

``configuration`` writes the ``dictConfig`` document; ``handler_for`` is the factory that document names,
which the server calls at start-up in every process that configures logging.
"""

from __future__ import annotations

from kvlog.integrate.dictconfig import configuration
from kvlog.integrate.errors import ConfigurationError
from kvlog.integrate.handler import EventHandler, handler_for
from kvlog.integrate.servers import LIVE_SERVERS

__all__ = ["LIVE_SERVERS", "ConfigurationError", "EventHandler", "configuration", "handler_for"]
