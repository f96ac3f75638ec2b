"""The base every typed event constructor derives from."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar


class Event:
    """A catalog event: a name, a schema version, and its fields (envelope fields are added at emission)."""

    __slots__ = ()
    EVENT: ClassVar[str]
    VERSION: ClassVar[int]

    def to_dict(self) -> dict[str, Any]:
        """Name, version and fields, in that order: everything but the envelope that emission adds.

        Generated per event as one dict display, because emission builds exactly this dict for every
        event it writes.
        """
        raise NotImplementedError

    def fields(self) -> dict[str, Any]:
        """The event's own fields, as the schema names them; optional fields left unset are omitted."""
        out = self.to_dict()
        del out["event"], out["schema_version"]
        return out


def slot_setters(cls: Any) -> tuple[Callable[[Any, Any], None], ...]:
    """The ``__set__`` of each field's slot of a frozen, slotted event class, in declaration order.

    A frozen dataclass's own ``__init__`` sets each field through ``object.__setattr__``, looked up
    by name for every field of every event: for a server emitting events on its hot path that was
    the largest cost of building one (1.5 us for ``KvPoolAllocation``, 0.4 us unfrozen). The
    generated ``__init__`` calls these instead: the same slots set, and the class stays frozen.
    """
    return tuple(getattr(cls, field.name).__set__ for field in dataclasses.fields(cls))
