"""The two ways a test runs ``kvlog ARGS...``: in this process (``kvlog``) or as a process (``kvlog_process``).

``kvlog`` (``kvlog_text`` to decode) is the default; jsonschema's ``tests/test_cli.py`` is the model. The
click group runs here, click's ``CliRunner`` standing in for the standard streams, and gives back what a
process would: a ``CompletedProcess`` with the exit status, the bytes written to standard output and,
separately, those written to standard error (click 8.2 removed ``mix_stderr``: ``stderr_bytes`` is its
own stream). An exception that no command caught, which a user would see as a traceback, fails the test
with that traceback. Starting ``python -m kvlog`` costs about 0.3 s of imports a run on the 2-core CI
machine; ~230 tests did, and took 40% of the suite's time (issue 31).

A run leaves this process as it found it: the CLI installs handlers for the stop signals and
``sys.unraisablehook`` (``kvlog.io.stopping.stop_on_signals``) and keeps a process-wide book of temporary
files; a command may change the working directory, the environment, the umask or the root logger.
``kvlog`` puts each back, so no state leaks from one test into the next (``tests/test_cli_harness.py``).

``kvlog_process`` starts a real process, for what only a process can show: a signal or a kill, a real
pipe whose reader goes away (exit 141), closed or inherited descriptors, a fork, standard input that is a
real pipe or terminal, the ``python -m kvlog`` entry point and the installed console script (``SCRIPT``).
TESTING.md says which to use when.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from kvlog.cli import main
from kvlog.io import stopping

#: ``python -m kvlog``, the entry point as a user of a checkout starts it
PYTHON_M_KVLOG = [sys.executable, "-m", "kvlog"]
#: the installed console script (``[project.scripts]``), as CI and pre-commit start it
SCRIPT = Path(sys.executable).with_name("kvlog")

_SIGNALS = (*stopping.STOP_SIGNALS, signal.SIGPIPE)


def kvlog(
    *args: str | Path, stdin: bytes | None = None, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """``kvlog ARGS...`` run in this process: (exit status, standard output, standard error), as bytes.

    ``env`` replaces the whole environment for the run, as ``subprocess.run(env=...)`` does. An exception
    that no command caught (a user would see its traceback) fails the test here, with that traceback.
    """
    argv = [os.fsdecode(arg) for arg in args]
    overrides: dict[str, str | None] | None = None
    if env is not None:
        overrides = {name: None for name in os.environ if name not in env}
        overrides.update(env)
    with _restored(cwd):
        result = CliRunner().invoke(main, argv, input=stdin, env=overrides, prog_name="kvlog")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        shown = "".join(traceback.format_exception(result.exception))
        raise AssertionError(f"kvlog {' '.join(argv)}: a traceback reached the user\n{shown}") from result.exception
    return subprocess.CompletedProcess(argv, result.exit_code, result.stdout_bytes, result.stderr_bytes)


def kvlog_text(
    *args: str | Path, stdin: bytes | None = None, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``kvlog`` in this process, both streams decoded (UTF-8, undecodable bytes as ``\\x..``), as ``text=True``."""
    done = kvlog(*args, stdin=stdin, cwd=cwd, env=env)
    return subprocess.CompletedProcess(done.args, done.returncode, _decoded(done.stdout), _decoded(done.stderr))


def _decoded(data: bytes | None) -> str | None:
    return None if data is None else data.decode(errors="backslashreplace")


@contextlib.contextmanager
def _restored(cwd: Path | None) -> Iterator[None]:
    """Run the block in ``cwd``; afterwards put back every piece of process state the CLI may change."""
    handlers = {signum: signal.getsignal(signum) for signum in _SIGNALS}
    unraisablehook = sys.unraisablehook
    books = dict(stopping._books)
    directory = os.getcwd()
    environment = dict(os.environ)
    umask = os.umask(0o022)
    os.umask(umask)
    root = logging.getLogger()
    root_handlers, root_level = list(root.handlers), root.level
    try:
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        os.chdir(directory)
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        sys.unraisablehook = unraisablehook
        stopping._books.clear()
        stopping._books.update(books)
        stopping._swallowed.clear()
        stopping._pending.clear()
        stopping._held = 0
        if os.environ != environment:
            os.environ.clear()
            os.environ.update(environment)
        os.umask(umask)
        root.handlers[:] = root_handlers
        root.setLevel(root_level)


def kvlog_process(
    *args: str | Path,
    stdin: bytes | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 300,
    text: bool = False,
    command: list[str] | None = None,
    no_traceback: bool = False,
    **popen: Any,
) -> subprocess.CompletedProcess[Any]:
    """``python -m kvlog ARGS...`` (or ``command ARGS...``) as a real process, its output captured.

    ``popen`` goes to ``subprocess.run`` as is (``preexec_fn``, ``stdout=`` a file, ``pass_fds``...);
    ``no_traceback`` fails the test if standard error holds one.
    """
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    done = subprocess.run(
        [*(command or PYTHON_M_KVLOG), *map(os.fsdecode, args)],
        input=stdin,
        cwd=cwd,
        env=None if env is None else dict(env),
        timeout=timeout,
        check=False,
        **popen,
    )
    if no_traceback and done.stderr is not None:
        assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    if text:
        return subprocess.CompletedProcess(done.args, done.returncode, _decoded(done.stdout), _decoded(done.stderr))
    return done
