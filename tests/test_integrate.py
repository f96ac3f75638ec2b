"""``kvlog integrate`` against the released logging code of sglang and vLLM: the adoption path, end to end.

Each case runs a process that configures logging exactly as the release does (its own
``configure_logger`` or ``vllm.logger``), once without kvlog and once with the configuration ``kvlog
integrate`` printed, named in the server's variable. The process logs every memory format of that
release (from the harvest, ``formats/<server>.json``) through the logger of the module that logs it, at
a fixed clock. Then: the text output is the same byte for byte; the handler's events are what ``kvlog
migrate`` makes of that text output, but for what a record knows better than a printed line (the exact
time, the process id, the source file and line, the logger).
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from follow_helpers import migrated
from prometheus_helpers import free_port, require, running_prometheus
from server_packages import SGLANG_NAMESPACE, _tool, sglang_configure_logger, vllm_logging

from kvlog import commands

TOOL = _tool("format_decisions")
RULES = TOOL.load_rules()
#: the clock every case logs at: 2026-12-03 19:04:05.25 UTC
CLOCK = 1796324645.25

#: (server, release): the first sglang that reads SGLANG_LOGGING_CONFIG_PATH and the newest; vLLM's newest,
#: whose engine processes configure from a LoggingConfig (``+config``) or from the variable, and 0.11, which
#: configured at import from a path read at import
RELEASES = [
    ("sglang", "0.4.6.post3"),
    ("sglang", "0.5.23"),
    ("vllm", "0.11.0"),
    ("vllm", "0.34.0"),
    ("vllm", "0.34.0+config"),
]

SERVER_SCRIPT = """
import json, logging, sys, time
time.time = lambda: {clock!r}
time.time_ns = lambda: {clock_ns!r}
records = json.load(open({records!r}))
{setup}
for logger, level, message, args in records:
    logging.getLogger(logger).log(getattr(logging, level), message, *args)
{after}
"""
SGLANG_SETUP = """
from types import SimpleNamespace
namespace = {{}}
exec({namespace!r}, namespace)
exec({function!r}, namespace)
namespace["configure_logger"](SimpleNamespace(log_level="info"), prefix=" DP1 TP1")
"""
VLLM_SETUP = """
import dataclasses, os
sys.path.insert(0, {path!r})
import vllm.logger
{config_class}
if hasattr(vllm.logger, "set_vllm_process_name"):  # 0.34 configures when its engine starts, not at import
    vllm.logger.set_vllm_process_name("Worker_TP1")
    vllm.logger._configure_vllm_root_logger({config})
"""
#: vllm/config/logging.py's LoggingConfig (0.34), its fields and defaults; the release's is a pydantic
#: dataclass (``vllm.config.utils.config``), which ``dataclasses.replace`` copies as it does this one
LOGGING_CONFIG = """
@dataclasses.dataclass
class LoggingConfig:
    log_level: str = "INFO"
    formatter: str = "text"
    configure_logging: bool = True
    pylogging_config_file: str | None = dataclasses.field(
        default_factory=lambda: os.environ.get("VLLM_LOGGING_CONFIG_PATH")
    )
"""


def memory_records(server: str, release: str) -> list[tuple[str, str, str, list[Any]]]:
    """(logger, level, message, args) for every format of ``release`` that a migration reads into an event.

    A %-style format is logged as the release logs it: the format string and its arguments, which the
    record formats; an f-string's message is what the release's code would have built.
    """
    releases = json.loads((TOOL.FORMATS / f"{server}.json").read_text())["releases"]
    index = releases.index(release)
    records = []
    for fmt in TOOL.load_formats(server):
        rule = TOOL.decide(fmt, RULES)
        if rule is None or rule.kind != "event" or not fmt.first_index <= index <= fmt.last_index:
            continue
        logger = fmt.files[0].removesuffix(".py").replace("/", ".")
        levels = {"warn": "WARNING", "warning": "WARNING", "error": "ERROR", "raise": "ERROR"}  # raised: an ERROR line
        level = levels.get(fmt.level.removesuffix("_once"), "INFO")
        if rule.samples:
            records += [(logger, level, message, []) for message in rule.samples]
        elif fmt.style == "percent":
            records.append((logger, level, fmt.text, percent_arguments(fmt)))
        else:
            records.append((logger, level, TOOL._render("", fmt, rule, 0).line, []))
    return records


def percent_arguments(fmt: Any) -> list[Any]:
    """Plausible arguments for a %-style format, of the type each conversion takes."""
    parts = TOOL.pieces(fmt)
    arguments: list[Any] = []
    for position, piece in enumerate(parts):
        if isinstance(piece, str):
            continue
        after = next((p for p in parts[position + 1 :] if isinstance(p, str)), "")
        value = TOOL._value(piece, after, 0)
        conversion = piece.spec[-1:]
        arguments.append(int(value) if conversion in "di" else float(value) if conversion in "efg" else value)
    return arguments


def run_server(
    tmp_path: Path, server: str, release: str, records: list[Any], config: Path | None, after: str = ""
) -> tuple[bytes, bytes]:
    """The process's standard output and error, configured as ``release`` does (with ``config`` in its variable)."""
    (tmp_path / "records.json").write_text(json.dumps(records))
    if server == "sglang":
        setup = SGLANG_SETUP.format(namespace=SGLANG_NAMESPACE, function=sglang_configure_logger(release))
    else:
        version, _, via = release.partition("+")
        config_class, call = (LOGGING_CONFIG, "LoggingConfig()") if via == "config" else ("", "")
        setup = VLLM_SETUP.format(path=str(vllm_logging(version)), config_class=config_class, config=call)
    script = tmp_path / "server.py"
    script.write_text(
        SERVER_SCRIPT.format(
            clock=CLOCK, clock_ns=int(CLOCK * 1e9), records=str(tmp_path / "records.json"), setup=setup, after=after
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_LOGGING_CONFIG_PATH")}
    env |= {"VLLM_LOGGING_STREAM": "ext://sys.stdout", "TZ": "UTC"}
    if config is not None:
        env[f"{server.upper()}_LOGGING_CONFIG_PATH"] = str(config)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout, done.stderr


def script_lines(tmp_path: Path) -> list[str]:
    return (tmp_path / "server.py").read_text().splitlines()


def without_pid(text: bytes) -> bytes:
    """Two runs are two processes: vLLM prints each one's pid."""
    return re.sub(rb"pid=[0-9]+", b"pid=N", text)


def what_a_line_says(event: dict[str, Any]) -> dict[str, Any]:
    """An event without what the record knows better than its printed line (and the lines of a file it has none of)."""
    event = {k: v for k, v in event.items() if k not in ("timestamp", "pid", "ext")}
    migrated = {k: v for k, v in event["migrated"].items() if k not in ("file", "line")}
    inferred = {
        k: {field: value for field, value in v.items() if field != "evidence_line"}
        for k, v in migrated.get("inferred", {}).items()
        if k != "timestamp"
    }
    migrated.pop("inferred", None)
    return {**event, "migrated": migrated | ({"inferred": inferred} if inferred else {})}


@pytest.mark.parametrize(("server", "release"), RELEASES, ids=[f"{s}-{r}" for s, r in RELEASES])
def test_the_adopted_server_prints_the_same_text_and_writes_the_events_migrate_reads_from_it(
    tmp_path: Path, server: str, release: str
) -> None:
    records = memory_records(server, release.partition("+")[0])
    request_logger = f"{server}.srt.managers.scheduler" if server == "sglang" else "vllm.engine"
    records.append((request_logger, "INFO", "Decode batch", []))
    assert len(records) >= 4, records
    config = tmp_path / "kvlog-logging.json"
    events = tmp_path / "kv-{pid}-{rank}.jsonl"
    config.write_text(json.dumps(commands.integrate(server, events=str(events))))

    plain_out, plain_err = run_server(tmp_path, server, release, records, None)
    adopted_out, adopted_err = run_server(tmp_path, server, release, records, config)

    assert without_pid(adopted_out) == without_pid(plain_out)
    assert without_pid(adopted_err) == without_pid(plain_err)
    text = plain_out + plain_err
    assert text.count(b"\n") == len(records), text.decode()  # every record printed, so the comparison means something

    written = list(tmp_path.glob("kv-*-*.jsonl"))
    assert len(written) == 1, written
    ranks = "-dp1-tp1" if server == "sglang" else "-main" if release == "0.11.0" else "-tp1"  # 0.11: no process name
    assert written[0].name.endswith(f"{ranks}.jsonl")
    live = [orjson.loads(line) for line in written[0].read_bytes().splitlines()]
    assert commands.validate(written[0]).exit_status == 0  # what the record adds keeps every event valid
    log = tmp_path / "server.log"
    log.write_bytes(text)
    out = io.BytesIO()
    outcome = commands.migrate(str(log), only_events=True, source=server, stdout=out)
    assert outcome.exit_status == 0, outcome.problems
    read = [orjson.loads(line) for line in out.getvalue().splitlines()]
    assert len(read) >= len(records) // 2, read  # most formats are one event each; some need a later line
    assert [what_a_line_says(event) for event in live] == [what_a_line_says(event) for event in read]
    call = 1 + next(n for n, line in enumerate(script_lines(tmp_path)) if ".log(getattr(logging, level)" in line)
    for event in live:
        assert event["timestamp"] == "2026-12-03T19:04:05.250000Z"
        assert event["migrated"]["file"] is None  # no file was read; the logging call is in ext
        assert (event["ext"]["code_file"], event["ext"]["code_line"]) == (str(tmp_path / "server.py"), call)
        assert event["ext"]["logger"] in {logger for logger, _, _, _ in records}
        assert "timestamp" not in event["migrated"].get("inferred", {})


FORKING_SETUP = """
import multiprocessing
from types import SimpleNamespace
namespace = {{}}
exec({namespace!r}, namespace)
exec({function!r}, namespace)
configure_logger = namespace["configure_logger"]
configure_logger(SimpleNamespace(log_level="info"))  # the launcher, without ranks

def scheduler(tp):  # as sglang's: configures with its ranks, logs, and ends (multiprocessing: in os._exit)
    configure_logger(SimpleNamespace(log_level="info"), prefix=f" TP{{tp}}")
    for logger, level, message, args in records:
        logging.getLogger(logger).log(getattr(logging, level), message, *args)

children = [multiprocessing.get_context("fork").Process(target=scheduler, args=(tp,)) for tp in range(2)]
for child in children:
    child.start()
for child in children:
    child.join()
records = []
"""


def test_each_forked_process_writes_its_own_events_with_its_ranks(tmp_path: Path) -> None:
    """sglang's schedulers: one process per rank, each configuring logging with its prefix.

    A forked ``multiprocessing`` child ends in ``os._exit``, past ``logging.shutdown``: the pool still
    waiting for its post-capture line at the end must be written all the same.
    """
    records = [*memory_records("sglang", "0.5.23"), *WAITING_POOL]
    events = tmp_path / "kv-{pid}-{rank}.jsonl"
    config = tmp_path / "kvlog-logging.json"
    config.write_text(json.dumps(commands.integrate("sglang", events=str(events))))
    (tmp_path / "records.json").write_text(json.dumps(records))
    script = tmp_path / "server.py"
    setup = FORKING_SETUP.format(namespace=SGLANG_NAMESPACE, function=sglang_configure_logger("0.5.23"))
    script.write_text(
        SERVER_SCRIPT.format(
            clock=CLOCK, clock_ns=int(CLOCK * 1e9), records=str(tmp_path / "records.json"), setup=setup, after=""
        )
    )
    env = {**os.environ, "SGLANG_LOGGING_CONFIG_PATH": str(config)}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode()
    written = sorted(tmp_path.glob("kv-*.jsonl"), key=lambda path: path.name.rsplit("-", 1)[1])
    assert [path.name.rsplit("-", 1)[1] for path in written] == ["tp0.jsonl", "tp1.jsonl"]
    pids = set()
    text = "".join(f"[2026-12-03 19:04:05 TP0] {message % tuple(args)}\n" for _, _, message, args in records)
    (tmp_path / "one.log").write_text(text)
    expected = [event["event"] for event in migrated_events(tmp_path / "one.log")]
    assert expected[-1] == "kv_pool.allocation"  # the pool that waits to the end
    for tp, path in enumerate(written):
        live = [orjson.loads(line) for line in path.read_bytes().splitlines()]
        assert [event["event"] for event in live] == expected, path
        assert {tuple(event["ranks"].items()) for event in live} == {(("tp", tp),)}
        assert {event["pid"] for event in live} == {int(path.name.split("-")[1])}
        pids.add(int(path.name.split("-")[1]))
    assert len(pids) == 2
    assert done.stderr.count(b"] ") >= 2 * len(records)  # the schedulers' text, as sglang prints it


#: an arena and the pool in it, in a build that sizes pools after capture: the pool waits for a later line
WAITING_POOL = [
    (
        "sglang.srt.mem_cache.memory_pool",
        "INFO",
        "KvVmmArena[%s] ready: device=0 reserved=78.8 GiB granularity=2048 KiB",
        [0],
    ),
    (
        "sglang.srt.mem_cache.memory_pool",
        "INFO",
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1933312, K size: 36.88 GB, V size: 36.88 GB",
        [],
    ),
]


def migrated_events(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in migrated(path)]


def test_an_unwritable_events_path_leaves_the_server_and_its_text_alone(tmp_path: Path) -> None:
    records = memory_records("sglang", "0.5.23")
    config = tmp_path / "kvlog-logging.json"
    config.write_text(json.dumps(commands.integrate("sglang", events=str(tmp_path / "missing" / "kv-{pid}.jsonl"))))
    _, plain = run_server(tmp_path, "sglang", "0.5.23", records, None)
    _, adopted = run_server(tmp_path, "sglang", "0.5.23", records, config)
    notices = [line for line in adopted.splitlines() if line.startswith(b"kvlog: ")]
    assert [line for line in adopted.splitlines() if not line.startswith(b"kvlog: ")] == plain.splitlines()
    assert len(notices) == 2, notices  # said once, and the count of what was dropped at exit
    assert b"cannot write events: No such file or directory" in notices[0]
    assert b"records dropped" in notices[1]


def test_kept_configuration_keeps_its_handlers_and_adds_kvlog_where_records_end(tmp_path: Path) -> None:
    """``--keep``: the user's own file handler and format stay; kvlog reads the records too."""
    own = tmp_path / "own.log"
    kept = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(levelname)s %(name)s %(message)s"}},
        "handlers": {"file": {"class": "logging.FileHandler", "filename": str(own), "formatter": "plain"}},
        "loggers": {"vllm": {"handlers": ["file"], "level": "INFO", "propagate": False}},
    }
    (tmp_path / "kept.json").write_text(json.dumps(kept))
    events = tmp_path / "kv-{rank}.jsonl"
    merged = commands.integrate("vllm", events=str(events), keep=tmp_path / "kept.json")
    assert merged["loggers"]["vllm"]["handlers"] == ["file", "kvlog"]
    assert merged["root"]["handlers"] == ["kvlog"]
    assert merged["handlers"]["file"] == kept["handlers"]["file"]
    config = tmp_path / "kvlog-logging.json"
    config.write_text(json.dumps(merged))
    records = memory_records("vllm", "0.34.0")
    run_server(tmp_path, "vllm", "0.34.0", records, config)
    printed = [f"{level} {logger} {message % tuple(args)}" for logger, level, message, args in records]
    assert own.read_text().splitlines() == printed
    live = [orjson.loads(line) for line in (tmp_path / "kv-tp1.jsonl").read_bytes().splitlines()]
    assert len(live) >= len(records) // 2
    assert commands.integrate("vllm", events=str(events), keep=config) == merged  # merging twice changes nothing


def test_integrate_prints_the_configuration_and_refuses_what_cannot_be_merged(tmp_path: Path) -> None:
    kvlog = [str(Path(sys.executable).with_name("kvlog")), "integrate"]
    done = subprocess.run(
        [*kvlog, "sglang", "--events", "kv-{pid}.jsonl"], capture_output=True, cwd=tmp_path, check=False
    )
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["handlers"]["kvlog"] == {
        "()": "kvlog.integrate.handler_for",
        "server": "sglang",
        "events": str(tmp_path / "kv-{pid}.jsonl"),
    }
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"version": 1, "handlers": {"kvlog": {"class": "logging.StreamHandler"}}}))
    for argument, reason in [
        (str(other), "already has a handler named 'kvlog' that kvlog did not write"),
        (str(tmp_path / "none.json"), "cannot read: No such file or directory"),
    ]:
        done = subprocess.run([*kvlog, "vllm", "--keep", argument], capture_output=True, check=False)
        assert done.returncode == 2
        assert done.stderr.decode() == f"kvlog integrate: {argument}: {reason}\n"
        assert done.stdout == b""


HOLD_UNTIL_SCRAPED = """
import os
open({ready!r}, "w").close()
deadline = time.monotonic() + 60
while not os.path.exists({done!r}) and time.monotonic() < deadline:
    time.sleep(0.05)
"""


def test_metrics_port_serves_the_process_gauges_to_a_real_prometheus(tmp_path: Path) -> None:
    """``--metrics-port N``: the worker of TP rank 1 serves at N + 1, scraped by Prometheus while the server runs."""
    prometheus = require("prometheus")
    base = free_port()
    while base + 1 == free_port():  # N + 1 must be free too (a free port's neighbour usually is)
        base = free_port()
    events = tmp_path / "kv-{rank}.jsonl"
    config = tmp_path / "kvlog-logging.json"
    config.write_text(json.dumps(commands.integrate("vllm", events=str(events), metrics_port=base)))
    ready, done = tmp_path / "ready", tmp_path / "done"
    after = HOLD_UNTIL_SCRAPED.format(ready=str(ready), done=str(done))
    records = memory_records("vllm", "0.34.0")
    result: dict[str, tuple[bytes, bytes]] = {}
    server = threading.Thread(
        target=lambda: result.setdefault("run", run_server(tmp_path, "vllm", "0.34.0", records, config, after))
    )
    server.start()
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        written = tmp_path / "kv-tp1.jsonl"
        while not written.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        with running_prometheus(prometheus, [f"http://127.0.0.1:{base + 1}/metrics"], tmp_path) as scraper:
            count = len(written.read_bytes().splitlines())
            series = scraper.wait_for(
                'sum(kvlog_events_total{server="vllm"})',
                lambda got: bool(got) and float(got[0]["value"][1]) == count,
                f"the {count} events the worker wrote",
            )
            assert series
    finally:
        done.touch()
        server.join(60)
    assert "run" in result
    assert b"serving metrics of pid" in result["run"][1]


UVICORN_AFTER = """
import os
import uvicorn
path = os.environ.get("VLLM_LOGGING_CONFIG_PATH")  # vLLM's get_uvicorn_log_config: the same file, if any
uvicorn.Config(app="server:app", **({"log_config": json.load(open(path))} if path else {}))
logging.getLogger("uvicorn.error").info("Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)")
access = ("127.0.0.1:5000", "POST", "/v1/completions", "1.1", 200)
logging.getLogger("uvicorn.access").info('%s - "%s %s HTTP/%s" %d', *access)
for logger, level, message, args in records:  # the engine's records after the API server started
    logging.getLogger(logger).log(getattr(logging, level), message, *args)
"""


def test_vllm_api_server_handing_the_file_to_uvicorn_keeps_uvicorn_output_and_the_events(tmp_path: Path) -> None:
    """vLLM (0.2x on) passes its logging file to uvicorn as ``log_config``, in place of uvicorn's own default."""
    records = memory_records("vllm", "0.34.0")
    config = tmp_path / "kvlog-logging.json"
    config.write_text(json.dumps(commands.integrate("vllm", events=str(tmp_path / "kv-{pid}.jsonl"))))
    plain_out, plain_err = run_server(tmp_path, "vllm", "0.34.0+config", records, None, UVICORN_AFTER)
    adopted_out, adopted_err = run_server(tmp_path, "vllm", "0.34.0+config", records, config, UVICORN_AFTER)
    assert b"Uvicorn running on http://0.0.0.0:8000" in plain_err
    assert b'"POST /v1/completions HTTP/1.1" 200' in plain_out
    assert without_pid(adopted_out) == without_pid(plain_out)
    assert without_pid(adopted_err) == without_pid(plain_err)
    (written,) = tmp_path.glob("kv-*.jsonl")
    names = [orjson.loads(line)["event"] for line in written.read_bytes().splitlines()]
    once = len(names) // 2
    assert once and names == names[:once] * 2  # the records before uvicorn and after it, both read
