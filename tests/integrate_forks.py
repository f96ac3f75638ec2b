"""A server process that forks while kvlog's handler works, run in a fresh interpreter (``python integrate_forks.py``).

Fresh, because what a fork can catch half done is the first use of a module: in the test process
every module the worker uses was imported long ago. Each child logs one scheduler's start-up through
the handler it inherited, closes it as its ``logging.shutdown`` would, and exits through ``os._exit``;
what it wrote is in ``DIR/kv-<pid>.jsonl``, what it said in ``DIR/said-<pid>.txt``, and whether any
module was still being imported when it started in ``DIR/importing-<pid>.txt``.

- ``moment DIR``: one child, forked while the worker is inside an import if it ever is (an audit hook
  holds it there), else once the worker has written its first event.
- ``flood DIR N``: N children, forked one after another from the start while another thread logs
  records all along (the worker reading them), at whatever moment each fork falls.
- ``imports DIR``: no fork; the modules the worker imported once the handler was made, one a line.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from pathlib import Path

from kvlog.integrate.handler import EventHandler
from kvlog.integrate.servers import SGLANG
from kvlog.text.prefix import SGLANG as SGLANG_PREFIX

CORPUS = Path(__file__).parent / "corpus"
#: as ``test_integrate_handler.START_UP`` (that module imports half of kvlog, which this one must not)
START_UP = [
    SGLANG_PREFIX.split(line).message
    for line in (CORPUS / "postcapture_before_fix_2026_07.log").read_text().splitlines()[:12]
    if " TP0]" in line
]
WORKER = "kvlog-events"


def _record(message: str) -> logging.LogRecord:
    return logging.makeLogRecord({"name": "sglang.srt", "msg": message, "levelno": logging.INFO})


def _importing() -> list[str]:
    """The modules whose import has begun and not ended."""
    return sorted(
        name
        for name, module in list(sys.modules.items())
        if getattr(getattr(module, "__spec__", None), "_initializing", False)
    )


def _fork_child(handler: EventHandler, directory: Path) -> int:
    pid = os.fork()
    if pid:
        return pid
    try:  # the child: one scheduler's start-up, then its end
        me = os.getpid()
        (directory / f"importing-{me}.txt").write_text("".join(f"{name}\n" for name in _importing()))
        with (directory / f"said-{me}.txt").open("w") as said:
            sys.stderr = said
            for message in START_UP:
                handler.handle(_record(message))
            handler.close()
    finally:
        os._exit(0)


def _events(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


def moment(directory: Path) -> None:
    inside, forked = threading.Event(), threading.Event()

    def hold_inside_an_import(event: str, _args: object) -> None:
        if event == "import" and threading.current_thread().name == WORKER and not inside.is_set() and _importing():
            inside.set()
            forked.wait(30)

    sys.addaudithook(hold_inside_an_import)
    handler = EventHandler(SGLANG, str(directory / "kv-{pid}.jsonl"), ranks={"tp": 0})
    handler.handle(_record(START_UP[0]))
    mine = directory / f"kv-{os.getpid()}.jsonl"
    while not inside.wait(0.01) and not _events(mine):
        pass
    child = _fork_child(handler, directory)
    forked.set()
    os.waitpid(child, 0)
    handler.close()
    print(child)


def flood(directory: Path, children: int) -> None:
    handler = EventHandler(SGLANG, str(directory / "kv-{pid}.jsonl"), ranks={"tp": 0})
    stop = threading.Event()

    def log_on() -> None:
        while not stop.wait(0.001):
            for message in START_UP:
                handler.handle(_record(message))

    logging_thread = threading.Thread(target=log_on)
    logging_thread.start()
    try:
        pids = [_fork_child(handler, directory) for _ in range(children)]
        for pid in pids:
            os.waitpid(pid, 0)
    finally:
        stop.set()
        logging_thread.join()
        with Path(os.devnull).open("w") as quiet, contextlib.redirect_stderr(quiet):  # its own drops, if any
            handler.close()
    print(*pids)


def imports(directory: Path) -> None:
    seen: list[str] = []

    def on_the_worker(event: str, args: tuple[object, ...]) -> None:
        if event == "import" and threading.current_thread().name == WORKER:
            seen.append(str(args[0]))

    handler = EventHandler(SGLANG, str(directory / "kv.jsonl"), ranks={"tp": 0}, metrics_port=0)
    sys.addaudithook(on_the_worker)
    unreadable = "KV Cache is allocated. #tokens: many, K size: 1 GB"  # a memory line no rule reads
    old_event = '{"event": "kv_pool.allocation", "schema_version": 1, "migrated": {"by": "another tool"}}'
    with Path(os.devnull).open("w") as quiet, contextlib.redirect_stderr(quiet):  # the metrics notice
        for message in [*START_UP, unreadable, old_event]:
            handler.handle(_record(message))
        handler.close()
    print("".join(f"{name}\n" for name in sorted(set(seen))), end="")


if __name__ == "__main__":
    mode, where = sys.argv[1], Path(sys.argv[2])
    if mode == "moment":
        moment(where)
    elif mode == "flood":
        flood(where, int(sys.argv[3]))
    else:
        imports(where)
