"""Stop signals in processes forked while a signal was held back (``kvlog.io.stopping``)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
from collections.abc import Iterator
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

import pytest

from kvlog.io.errors import Stopped
from kvlog.io.stopping import STOP_SIGNALS, held_back, stop_on_signals

pytestmark = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
FORK = multiprocessing.get_context("fork")


def _worker(ready: Connection) -> None:
    stop_on_signals(worker=True)
    with held_back():  # a block of its own: a stop signal the parent held back must not fire here
        pass
    ready.send("ready")
    ready.recv()  # waits, as an idle pool worker waits for its next task


@pytest.fixture
def stop_handlers() -> Iterator[None]:
    """This process's handlers and unraisable hook as they were, after a test turned signals into Stopped."""
    handlers = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    hook = sys.unraisablehook
    yield
    for signum, handler in handlers.items():
        signal.signal(signum, handler)
    sys.unraisablehook = hook


def _ready(worker: BaseProcess, parent_end: Connection) -> int:
    assert parent_end.poll(60), "the worker never started"
    assert parent_end.recv() == "ready"
    assert worker.pid is not None
    return worker.pid


@pytest.mark.parametrize("signum", STOP_SIGNALS)
def test_a_worker_forked_inside_a_held_block_stops_on_a_stop_signal(signum: int) -> None:
    """A pool forks its workers as tasks are submitted, which kvlog does inside ``held_back``.

    The worker never leaves its parent's block; before, it held every stop signal back for its whole life,
    and Python 3.12's pool, which SIGTERMs the other workers when one dies, waited for them for ever.
    """
    parent_end, child_end = FORK.Pipe()
    with held_back():
        worker = FORK.Process(target=_worker, args=(child_end,))
        worker.start()
    try:
        os.kill(_ready(worker, parent_end), signum)
        worker.join(60)
        assert worker.exitcode == 128 + signum, "the worker held the stop signal back"
    finally:
        if worker.is_alive():
            worker.kill()
            worker.join()


@pytest.mark.usefixtures("stop_handlers")
def test_a_signal_held_back_in_the_parent_stops_the_parent_alone() -> None:
    """The parent raises it as its block ends; a worker forked meanwhile neither inherits it nor ends the block."""
    stop_on_signals()
    parent_end, child_end = FORK.Pipe()
    with pytest.raises(Stopped) as stopped, held_back():
        signal.raise_signal(signal.SIGTERM)  # held back: the block goes on
        worker = FORK.Process(target=_worker, args=(child_end,))
        worker.start()
        _ready(worker, parent_end)  # the worker left a block of its own and was not stopped
        parent_end.send("go")
        worker.join(60)
        assert worker.exitcode == 0
    assert stopped.value.signum == signal.SIGTERM


def _idle_child(ready: Connection) -> None:
    """A forked child that installs no handler of its own, as a pool worker of ``kvlog validate``."""
    ready.send("ready")
    ready.recv()


@pytest.mark.usefixtures("stop_handlers")
@pytest.mark.parametrize("signum", STOP_SIGNALS)
def test_a_child_forked_by_a_stopping_run_exits_on_a_stop_signal_without_unwinding_its_parents_stack(
    signum: int, capfd: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C reaches the whole process group: a worker idle in its pool's loop raised ``Stopped`` there,
    and multiprocessing printed its traceback (``Process ForkProcess-4: Traceback ...``) to the user."""
    stop_on_signals()
    parent_end, child_end = FORK.Pipe()
    worker = FORK.Process(target=_idle_child, args=(child_end,))
    worker.start()
    try:
        os.kill(_ready(worker, parent_end), signum)
        worker.join(60)
        assert worker.exitcode == 128 + signum
    finally:
        if worker.is_alive():
            worker.kill()
            worker.join()
    assert "Traceback" not in capfd.readouterr().err
