"""What a forked child re-creates: its pid, and every lock of the emission path, free.

A lock another thread held at the moment of ``fork()`` stays held forever in the child, where that
thread does not exist; as stdlib ``logging`` does, the child starts with fresh ones, so a fork while
another thread was writing cannot leave the child's ``emit()`` waiting forever.
"""

from __future__ import annotations

import os
import threading
import weakref
from functools import cached_property

from kvlog.schema.event_validator import EventValidator

#: the process's pid, read by every envelope: one element, replaced in place in a forked child
current_pid = [os.getpid()]


class Locked:
    """Something that holds a lock on the emission path and takes a new one in a forked child."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        _locked.add(self)

    def after_fork(self) -> None:
        """Start the child with the lock free."""
        self.lock = threading.Lock()


_locked: weakref.WeakSet[Locked] = weakref.WeakSet()


def _reinit_after_fork() -> None:
    """In a forked child: the child's pid, and every lock of the emission path free again.

    ``cached_property`` (Python < 3.12) computes under a lock of its own, shared by every validator.
    """
    current_pid[0] = os.getpid()
    for owner in list(_locked):
        owner.after_fork()
    for attribute in vars(EventValidator).values():
        if isinstance(attribute, cached_property) and hasattr(attribute, "lock"):
            attribute.lock = threading.RLock()


os.register_at_fork(after_in_child=_reinit_after_fork)
