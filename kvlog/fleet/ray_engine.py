"""The Ray engine: a file per task on the cluster, results back in input order, a lost node retried.

Fleet operators already run Ray (vLLM and sglang serve across nodes with it), so kvlog runs on their
cluster rather than on a scheduler of its own. Each item is a Ray task (``max_retries``: a task whose
node died runs again elsewhere; an exception of kvlog's own is never retried, it is the item's
answer). What a worker builds once (a migrator, a validator) is kept per worker process, for the
run that built it. A task is a streaming generator: the files it wrote for the driver (staged output,
dead letters) come back in blocks before its result, so neither side ever holds a whole file, and a
retried task yields the same blocks again under the same object ids, which the driver reads once.

Progress comes the same way: a task asked to report its reads runs its function in a thread and
yields a ``_Read`` for every ``READ_REPORT_BYTES`` of input read, as they are read, before its blocks.
The number of those items depends only on how many bytes the file had, so a retried task's stream
has its blocks at the same places, and the driver reads each item once.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import socket
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

import ray
from ray.exceptions import RayError, RayTaskError

from kvlog.fleet.errors import ClusterError
from kvlog.io.errors import WorkerDied
from kvlog.io.progress import task_reads_to

#: how often Ray runs a task again whose worker or node died
TASK_RETRIES = 3
#: the size of a block of a task's file on its way to the driver
BLOCK_BYTES = 4 << 20
#: tasks submitted ahead of the one whose result is awaited, per CPU of the cluster
_AHEAD_PER_CPU = 2
#: a task reporting its reads yields one progress item per this many bytes of input read
READ_REPORT_BYTES = 4 << 20
#: how often a task reporting its reads looks up from its work to pass them on
_WAKE_S = 0.1
#: how long an address may take to accept a connection before it is called unreachable
CONNECT_TIMEOUT_S = 10.0
#: the variable ``ray.init`` reads an address from when none is given
RAY_ADDRESS = "RAY_ADDRESS"

#: in a Ray worker process: what ``start`` built, for the run whose token is the key (one run at a time)
_states: dict[str, object] = {}


@dataclass(frozen=True)
class _Block:
    """A piece of a file a task wrote, on its way to the driver."""

    field: str
    data: bytes


@dataclass(frozen=True)
class _Read:
    """So many more bytes of a task's input were read (progress, for the driver's display)."""

    count: int


class _Stopped(BaseException):
    """Raised at a task's next read once its stream was cancelled: the work stops, its temporaries removed."""


@contextmanager
def connected(address: str | None, on_notice: Callable[[str], None]) -> Iterator[RayCluster]:
    """The Ray cluster at ``address`` (``None``: the one this machine runs, else a new local one).

    A cluster this call started is shut down at the end; one it joined is left running.
    """
    if ray.is_initialized():  # a library caller's own connection: used as it is
        yield RayCluster()
        return
    used = _addresses_in_use(address)
    for found, source in used:
        _reachable(found, source)
    try:
        _init(address or "auto")
    except ConnectionError:
        if address is not None or used:  # a cluster was named or found: never swapped for a new one
            named = ", ".join(found if source is None else f"{found} (from {source})" for found, source in used)
            raise ClusterError("cannot connect to the Ray cluster at {named}", named=named or address) from None
        on_notice("no Ray cluster is running on this machine: started a local one")
        _init(None)
    try:
        yield RayCluster()
    finally:
        ray.shutdown()
        _driver_prints(enabled=True)


def _init(address: str | None) -> None:
    ray.init(
        address=address,
        logging_level=logging.ERROR,
        log_to_driver=False,
        include_dashboard=False,
        configure_logging=True,
    )
    _driver_prints(enabled=False)


def _driver_prints(*, enabled: bool) -> None:
    """Let Ray's driver print the cluster's error messages, or not (while kvlog runs on the cluster).

    ``log_to_driver=False`` stops the workers' output, not the thread by which the driver prints what
    the raylets publish (``listen_error_messages``: "A worker died or was killed ...", in yellow) to
    ``sys.stdout``, which is kvlog's events stream: written in 4 MiB blocks cut at any byte, a message
    could land inside an event line. kvlog says itself what a lost task cost (Ray retries it; a file
    lost for good is named in the report), so the output stays that of ``--jobs 1``; the message is
    still in the raylet's log on its node. Ray's own switch for its debugger is the one used here.
    """
    ray._private.worker._worker_logs_enabled = enabled  # the only switch Ray has for it (private)


def _addresses_in_use(given: str | None) -> list[tuple[str, str | None]]:
    """The addresses ``ray.init(address=given or "auto")`` may connect to, each with where it came from.

    Ray's own order (``ray._private.services.get_ray_address_from_environment``): an address given,
    else ``RAY_ADDRESS``, else the file the last ``ray start`` here wrote (left behind by a head that
    died without ``ray stop``), else the GCS of any raylet running here. None at all: ``ray.init``
    starts a local cluster. Each of them is checked, since ``ray.init`` retries a dead one for minutes
    whatever told it the address. The source of ``given`` is ``None``: the option itself.
    """
    if given not in {None, "auto"}:
        return [(str(given), None)]
    if environment := os.environ.get(RAY_ADDRESS):
        return [(environment, RAY_ADDRESS)] if environment != "local" else []  # local: a new cluster, as ray does
    from ray._private import services, utils  # noqa: PLC0415 - where ray's "auto" looks; private, so read here only

    if recorded := utils.read_ray_address():
        file = utils.get_ray_address_file(None)  # type: ignore[attr-defined]  # Ray 2.40 defines it here, 2.5x imports it
        return [(recorded, f"{file}, written by the last `ray start` here")]
    running = services.find_gcs_addresses()  # type: ignore[no-untyped-call]
    return [(address, "a raylet running on this machine") for address in sorted(running)]


def _reachable(address: str, source: str | None) -> None:
    """Refuse an address nothing listens at: ``ray.init`` would retry it for minutes, printing warnings.

    The message says where the address came from (``source``; ``None``: the option), so that it points
    at what to change: the option, the variable, or a stale file (``ray stop`` removes it).
    """
    origin = "{ray_address}" if source is None else "{source}"
    host, separator, port = address.removeprefix("ray://").rpartition(":")
    if not separator or not host or not port.isdigit():
        raise ClusterError(
            origin + " {address}: expected HOST:PORT or ray://HOST:PORT", address=repr(address), source=source
        )
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise ClusterError(
            "cannot connect to the Ray cluster at {address} (from " + origin + "): {error}",
            address=address,
            source=source,
            error=exc.strerror or str(exc),
        ) from None


class RayCluster:
    """The engine of ``--engine ray``: tasks on the cluster this process is connected to."""

    local = False

    def __init__(self) -> None:
        resources: dict[str, float] = ray.cluster_resources()  # type: ignore[no-untyped-call]
        self.workers = max(1, int(resources.get("CPU", 1)))

    def in_order(
        self,
        function: Callable[[Any, Any], Any],
        items: Iterable[Any],
        *,
        start: Callable[..., Any],
        start_args: tuple[Any, ...],
        streamed: tuple[str, ...] = (),
        lost: Callable[[Any, str], Any] | None = None,
        on_read: Callable[[int], None] | None = None,
    ) -> Generator[Any, None, None]:
        """See ``kvlog.io.workers.Engine``; the driver's copies of streamed files are its to remove."""
        remote = _run.options(num_returns="streaming", max_retries=TASK_RETRIES, retry_exceptions=False)
        token = secrets.token_hex(8)
        pending: deque[tuple[Any, Any]] = deque()
        received = Path(tempfile.mkdtemp(prefix="kvlog-ray-"))
        try:
            for item in items:
                task = remote.remote(token, start, start_args, function, item, streamed, on_read is not None)
                pending.append((item, task))
                if len(pending) >= _AHEAD_PER_CPU * self.workers:
                    yield _received(*pending.popleft(), streamed, received, lost=lost, on_read=on_read)
            while pending:
                yield _received(*pending.popleft(), streamed, received, lost=lost, on_read=on_read)
        finally:
            for _, generator in pending:
                with suppress(RayError):
                    ray.cancel(generator)
            shutil.rmtree(received, ignore_errors=True)


def _received(
    item: Any,
    generator: Any,
    streamed: tuple[str, ...],
    directory: Path,
    *,
    lost: Callable[[Any, str], Any] | None,
    on_read: Callable[[int], None] | None,
) -> Any:
    """The result of one task, its streamed files written to ``directory`` and named in it."""
    files: dict[str, IO[bytes]] = {}
    try:
        for reference in generator:
            value = ray.get(reference)
            if isinstance(value, _Read):
                if on_read is not None:
                    on_read(value.count)
                continue
            if not isinstance(value, _Block):
                return _with_files(value, streamed, files, directory)
            if value.field not in files:
                files[value.field] = _local_file(directory)
            files[value.field].write(value.data)
        raise RayError("the task ended without a result")
    except RayTaskError as exc:
        raise exc.as_instanceof_cause() from None  # type: ignore[no-untyped-call]  # kvlog's own error, raised in the task
    except RayError as exc:
        if lost is None:
            raise WorkerDied(f"a task was lost on the Ray cluster: {exc}") from None
        return lost(item, f"lost on the Ray cluster after {TASK_RETRIES} retries: {type(exc).__name__}")
    finally:
        for handle in files.values():
            handle.close()


def _local_file(directory: Path) -> IO[bytes]:
    return tempfile.NamedTemporaryFile(dir=directory, delete=False)


def _with_files(result: Any, streamed: tuple[str, ...], files: dict[str, IO[bytes]], directory: Path) -> Any:
    """The result, each streamed field naming the driver's copy (an empty file where no block came)."""
    names = {}
    for field in streamed:
        if getattr(result, field) is None:
            continue
        if field not in files:
            files[field] = _local_file(directory)
        names[field] = files[field].name
    return replace(result, **names) if names else result


@ray.remote
def _run(  # noqa: PLR0917 - Ray passes a task's arguments positionally
    token: str,
    start: Callable[..., Any],
    start_args: tuple[Any, ...],
    function: Callable[[Any, Any], Any],
    item: Any,
    streamed: tuple[str, ...],
    report_reads: bool,
) -> Iterator[Any]:
    """One item on a worker: its reads (``report_reads``), its streamed files block by block, then its result."""
    if token not in _states:
        _states.clear()  # a worker serves one run at a time: an earlier run's state is done with
        _states[token] = start(*start_args)
    if report_reads:
        result = yield from _reporting_reads(function, _states[token], item)
    else:
        result = function(_states[token], item)
    for field in streamed:
        path = getattr(result, field)
        if path is None:
            continue
        try:
            with Path(path).open("rb") as stream:
                while block := stream.read(BLOCK_BYTES):
                    yield _Block(field, block)
        finally:
            Path(path).unlink(missing_ok=True)
    yield result


def _reporting_reads(function: Callable[[Any, Any], Any], state: Any, item: Any) -> Generator[_Read, None, Any]:
    """``function(state, item)`` in a thread, a ``_Read`` yielded for each ``READ_REPORT_BYTES`` it reads.

    The items go out as the bytes are read, so a driver shows a large file's progress before it is
    done. This thread waits in ``join`` with a timeout: a cancellation (Ray raises KeyboardInterrupt
    in the task's thread) reaches it there, where a ``queue.SimpleQueue.get`` never let it through;
    the function is then stopped at its next read, unwinding as an exception does (its temporaries
    removed), and joined before the task ends.
    """
    counts: deque[int] = deque()
    stopped = threading.Event()
    ended: list[tuple[bool, Any]] = []
    read = 0

    def report(count: int) -> None:
        nonlocal read
        if stopped.is_set():
            raise _Stopped
        before, read = read, read + count
        counts.extend([READ_REPORT_BYTES] * (read // READ_REPORT_BYTES - before // READ_REPORT_BYTES))

    def work() -> None:
        try:
            with task_reads_to(report):
                ended.append((True, function(state, item)))
        except BaseException as exc:  # noqa: BLE001 - whatever it raised is raised again by the task
            ended.append((False, exc))

    thread = threading.Thread(target=work, name="kvlog-task", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(_WAKE_S)
            while counts:
                yield _Read(counts.popleft())
    finally:
        stopped.set()
        thread.join()
    returned, value = ended[0]
    if not returned:
        raise value
    return value
