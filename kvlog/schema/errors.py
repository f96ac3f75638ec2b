"""Every exception the schema layer raises to its callers, in one module."""

from __future__ import annotations


class DerefError(Exception):
    """A ``$ref`` that does not resolve, or that refers to itself forever."""

    def __init__(self, ref: str, path: tuple[str, ...], reason: str) -> None:
        self.ref = ref
        self.path = path
        self.reason = reason
        super().__init__(f"$ref {ref!r} at {'/'.join(path) or '(root)'}: {reason}")


class Undecided(Exception):
    """A schema the native validator cannot hold to the Python one's verdicts: its lines go to Python.

    Raised and caught while ``kvlog.schema.decoders`` derives the native table; it names the keyword
    that made the event undecided, which the table keeps as its reason.
    """


__all__ = ["DerefError", "Undecided"]
