"""Which engine runs a command's tasks: this machine's processes, or a Ray cluster (``--engine ray``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal

from kvlog.errors import OptionError

if TYPE_CHECKING:  # kvlog.io.workers imports multiprocessing and concurrent.futures: a one-file run does without
    from kvlog.io.workers import Engine

EngineName = Literal["local", "ray"]
#: the engines a command may be given, by name
ENGINES: tuple[EngineName, ...] = ("local", "ray")


@contextmanager
def cluster_for(
    engine: str, *, jobs: int | None, ray_address: str | None, on_notice: Callable[[str], None]
) -> Iterator[Engine | None]:
    """The Ray cluster ``engine`` names, connected for the block; ``None`` for the local engine.

    Raises ``OptionError`` for options that belong to the other engine and when Ray is not installed,
    and ``kvlog.fleet.ClusterError`` (a ``KvlogError``) when the cluster cannot be reached.
    """
    if engine not in ENGINES:
        raise OptionError("{engine} {given}: expected one of local, ray", given=repr(engine))
    if engine == "local":
        if ray_address is not None:
            raise OptionError("{ray_address} names a Ray cluster: it needs {engine} ray")
        yield None
        return
    if jobs not in {None, 1}:
        raise OptionError(
            "{jobs} sets this machine's worker processes: with {engine} ray the cluster's CPUs run the tasks"
        )
    try:
        from kvlog.fleet import connected  # noqa: PLC0415 - Ray is the fleet extra, imported only when asked for
    except ImportError:
        raise OptionError("{engine} ray needs Ray: pip install 'kvlog[fleet]'") from None
    with connected(ray_address, on_notice) as cluster:
        yield cluster
