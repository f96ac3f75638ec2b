"""The base every typed event constructor derives from."""

from __future__ import annotations

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
