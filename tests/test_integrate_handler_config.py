"""What ``handler_for`` gives a server's logging configuration, in this process: stand-ins of the servers' own calls.

``tests/test_integrate.py`` runs the released logging code of each server in a subprocess (fetched from
PyPI: skipped without the network). These stand-ins have the shape ``kvlog.integrate.servers`` relies on
(the configure function's name and parameters, the file read from the variable or kept from import,
the default configuration beside it) and load kvlog's configuration with ``logging.config.dictConfig``
as the servers do, so the factory's contract holds offline too: the server's own text output, kvlog's
events, and nothing else. The loggers a stand-in configures are given back after each test.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import logging.config
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
import uvicorn
from test_integrate_handler import START_UP, VLLM_BLOCKS

import kvlog.integrate.servers
from kvlog import commands
from kvlog.integrate.handler import EventHandler

#: the loggers the stand-ins and uvicorn configure
CONFIGURED = ["", "sglang", "vllm", "uvicorn", "uvicorn.error", "uvicorn.access"]

#: the stand-in vLLM's path as 0.11 kept it: read once, at import (each test sets it)
VLLM_PATH_AT_IMPORT: str | None = None
#: the stand-in vLLM's default configuration (vllm/logger.py's, in short): what it applies without a file
DEFAULT_LOGGING_CONFIG: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"vllm": {"format": "%(levelname)s [vllm] %(message)s"}},
    "handlers": {"vllm": {"class": "logging.StreamHandler", "formatter": "vllm", "stream": "ext://sys.stderr"}},
    "loggers": {"vllm": {"handlers": ["vllm"], "level": "INFO", "propagate": False}},
}


def configure_logger(server_args: Any, prefix: str = "") -> None:
    """sglang's ``configure_logger`` (``sglang/srt/utils``): the file named by the variable, else its default."""
    path = os.environ.get("SGLANG_LOGGING_CONFIG_PATH")
    if path:
        logging.config.dictConfig(json.loads(Path(path).read_text()))
        return
    default = logging.StreamHandler()
    default.setFormatter(logging.Formatter(f"[sglang{prefix}] %(message)s"))
    root = logging.getLogger()
    root.addHandler(default)
    root.setLevel(server_args.log_level.upper())


@dataclasses.dataclass
class LoggingConfig:
    """vLLM's ``LoggingConfig`` (0.2x on), the one field kvlog replaces."""

    pylogging_config_file: str | None = None


def _configure_vllm_root_logger(config: LoggingConfig | None = None) -> None:
    """vLLM's root-logger set-up: from its ``LoggingConfig``, else from the path it kept at import (0.11)."""
    path = VLLM_PATH_AT_IMPORT if config is None else config.pylogging_config_file
    logging.config.dictConfig(json.loads(Path(path).read_text()) if path else copy.deepcopy(DEFAULT_LOGGING_CONFIG))


@pytest.fixture
def server_logging() -> Iterator[None]:
    """This process's loggers as they were after the test: the handlers the stand-ins added closed and removed."""
    loggers = [logging.getLogger(name) for name in CONFIGURED]
    saved = [(logger, list(logger.handlers), logger.level, logger.propagate, logger.disabled) for logger in loggers]
    yield
    for logger, handlers, level, propagate, disabled in saved:
        for handler in list(logger.handlers):
            if handler not in handlers and not type(handler).__module__.startswith("_pytest"):
                logger.removeHandler(handler)
                handler.close()
        logger.setLevel(level)
        logger.propagate, logger.disabled = propagate, disabled


def kvlog_file(tmp_path: Path, server: str) -> Path:
    """The file ``kvlog integrate SERVER --events kv-{rank}.jsonl`` prints, as a user saves it."""
    config = tmp_path / "kvlog-logging.json"
    config.write_text(json.dumps(commands.integrate(server, events=str(tmp_path / "kv-{rank}.jsonl"))))
    return config


def closed_events(logger_name: str, path: Path) -> list[dict[str, Any]]:
    """Close kvlog's handler on ``logger_name`` (as logging.shutdown does at exit); the events it wrote."""
    made = [handler for handler in logging.getLogger(logger_name).handlers if isinstance(handler, EventHandler)]
    for handler in made:
        handler.close()
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


@pytest.mark.usefixtures("server_logging")
def test_sglang_loading_the_file_prints_its_own_text_and_writes_the_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The file replaces sglang's default: the factory runs that default itself and reads the same records."""
    monkeypatch.setenv("SGLANG_LOGGING_CONFIG_PATH", str(kvlog_file(tmp_path, "sglang")))
    configure_logger(SimpleNamespace(log_level="info"), prefix=" TP1")
    assert os.environ["SGLANG_LOGGING_CONFIG_PATH"] == str(tmp_path / "kvlog-logging.json")  # its children read it
    for message in START_UP[:2]:
        logging.getLogger("sglang.srt.model_executor").info(message)
    events = closed_events("", tmp_path / "kv-tp1.jsonl")
    assert capsys.readouterr().err.splitlines() == [f"[sglang TP1] {message}" for message in START_UP[:2]]
    assert [(event["event"], event["ranks"]) for event in events] == [
        ("weights.load_begin", {"tp": 1}),
        ("weights.load_end", {"tp": 1}),
    ]


@pytest.mark.parametrize("kept", [False, True], ids=["from its LoggingConfig", "path kept from import (0.11)"])
@pytest.mark.usefixtures("server_logging")
def test_vllm_loading_the_file_prints_its_own_text_and_writes_the_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], kept: bool
) -> None:
    """A release that cannot be made to forget the file loads it again: its default is applied instead."""
    config = kvlog_file(tmp_path, "vllm")
    monkeypatch.setattr(sys.modules[__name__], "VLLM_PATH_AT_IMPORT", str(config) if kept else None)
    _configure_vllm_root_logger(None if kept else LoggingConfig(str(config)))
    assert not kvlog.integrate.servers.configuring.active
    logging.getLogger("vllm.v1.core.kv_cache_utils").info(VLLM_BLOCKS, extra={"vllm_process_name": "Worker_TP1"})
    events = closed_events("vllm", tmp_path / "kv-tp1.jsonl")
    assert capsys.readouterr().err.splitlines() == [f"INFO [vllm] {VLLM_BLOCKS}"]
    assert [(event["event"], event["ranks"], event["num_gpu_blocks"]) for event in events] == [
        ("kv_pool.capacity", {"tp": 1}, 2048)
    ]


@pytest.mark.usefixtures("server_logging")
def test_uvicorn_given_the_file_by_vllms_api_server_keeps_its_own_output_and_reads_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """vLLM hands its logging file to uvicorn as ``log_config``: uvicorn's default is applied, kvlog adds nothing."""
    document = json.loads(kvlog_file(tmp_path, "vllm").read_text())
    uvicorn.Config(app="server:app", log_config=document)
    logging.getLogger("uvicorn.error").info("Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)")
    logging.getLogger("uvicorn.access").info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5000", "POST", "/v1", "1.1", 200)
    said = capsys.readouterr()
    assert said.err == "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)\n"
    assert said.out == 'INFO:     127.0.0.1:5000 - "POST /v1 HTTP/1.1" 200 OK\n'
    assert not [h for name in CONFIGURED for h in logging.getLogger(name).handlers if isinstance(h, EventHandler)]


@pytest.mark.usefixtures("server_logging")
def test_uvicorn_given_a_kept_configuration_sends_its_records_where_that_configuration_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--keep``: vLLM's API server hands the merged file to uvicorn too: the user's handlers, not uvicorn's own."""
    own = tmp_path / "own.log"
    kept = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(levelname)s %(name)s %(message)s"}},
        "handlers": {"file": {"class": "logging.FileHandler", "filename": str(own), "formatter": "plain"}},
        "root": {"handlers": ["file"], "level": "INFO"},
    }
    (tmp_path / "kept.json").write_text(json.dumps(kept))
    merged = commands.integrate("vllm", events=str(tmp_path / "kv-{rank}.jsonl"), keep=tmp_path / "kept.json")
    uvicorn.Config(app="server:app", log_config=merged)
    logging.getLogger("uvicorn.error").info("Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)")
    logging.getLogger("vllm.v1.core.kv_cache_utils").info(VLLM_BLOCKS, extra={"vllm_process_name": "Worker_TP1"})
    events = closed_events("", tmp_path / "kv-tp1.jsonl")
    assert capsys.readouterr().err == ""
    assert own.read_text().splitlines() == [
        "INFO uvicorn.error Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
        f"INFO vllm.v1.core.kv_cache_utils {VLLM_BLOCKS}",
    ]
    assert [event["event"] for event in events] == ["kv_pool.capacity"]


@pytest.mark.usefixtures("server_logging")
def test_the_file_loaded_outside_the_servers_configure_call_writes_events_and_says_the_text_is_not_set_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A user's own ``dictConfig`` of the printed file: no server default to run, so no text; the events all the same.

    (``--keep`` is the way to load kvlog into a configuration of one's own.)
    """
    logging.config.dictConfig(json.loads(kvlog_file(tmp_path, "sglang").read_text()))
    logging.getLogger().setLevel(logging.INFO)
    logging.getLogger("sglang.srt.model_executor").info(START_UP[0])
    events = closed_events("", tmp_path / "kv-main.jsonl")
    assert capsys.readouterr().err.splitlines() == [
        "kvlog: not loaded by sglang's configure_logger: the server's default handlers are not set up; events only"
    ]
    assert [event["event"] for event in events] == ["weights.load_begin"]
