"""Exceptions kvlog raises to its callers; each carries enough context to act on."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any


class KvlogError(Exception):
    """Base class of every error kvlog raises on purpose."""


class NamesOptions(KvlogError):
    """An error whose message may name a command's options, which the library spells as keyword arguments.

    The message is a template: ``{in_place}`` for each option it names (spelled as ``kvlog.commands``
    is called), ``{name}`` for each of ``values`` (file names and other text, kept out of the template so
    that their braces are never read as fields). ``worded(names)`` spells the options as a front end
    does (the CLI passes ``{"in_place": "--in-place", ...}``), so that no library message has to know
    the command line.
    """

    def __init__(self, template: str, /, **values: object) -> None:
        self.template = template
        self.values = values
        super().__init__(self.worded({}))

    def worded(self, names: Mapping[str, str]) -> str:
        """The message, each option named as ``names`` says (an option it leaves out: by its keyword)."""
        return self.template.format_map(_Wording({**names, **self.values}))

    def __reduce__(self) -> tuple[Any, ...]:  # pickled whole: the template and its values, not the message
        return functools.partial(type(self), self.template, **self.values), ()


class OptionError(NamesOptions):
    """A command cannot do what it was asked: options conflict, a value is out of range, an output names an input.

    Nothing was read or written.
    """


def worded(problem: object, names: Mapping[str, str]) -> str:
    """``problem`` as text, its options (if it is a ``NamesOptions``) spelled as ``names`` says."""
    return problem.worded(names) if isinstance(problem, NamesOptions) else str(problem)


class _Wording(dict[str, object]):
    def __missing__(self, key: str) -> str:
        return key


class CatalogError(KvlogError):
    """A schema file is missing, unreadable or inconsistent; the message names the file."""


class UnknownEventError(KvlogError):
    """An event name or version that the catalog does not define."""


class SchemaViolationError(KvlogError):
    """An emitted event failed validation while validation mode is ``raise``."""

    def __init__(self, event: str | None, version: object, errors: list[tuple[str, str]]) -> None:
        self.event = event
        self.version = version
        self.errors = errors
        detail = "; ".join(f"{path}: {message}" for path, message in errors)
        super().__init__(f"{event}@{version}: {detail}")


__all__ = [
    "CatalogError",
    "KvlogError",
    "NamesOptions",
    "OptionError",
    "SchemaViolationError",
    "UnknownEventError",
    "worded",
]
