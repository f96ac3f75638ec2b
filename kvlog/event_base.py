"""The base every typed event constructor derives from."""

from __future__ import annotations

from typing import Any, ClassVar


class Event:
    """A catalog event: a name, a schema version, and its fields (envelope fields are added at emission)."""

    __slots__ = ()
    EVENT: ClassVar[str]
    VERSION: ClassVar[int]

    def fields(self) -> dict[str, Any]:
        """The event's own fields, as the schema names them; optional fields left unset are omitted."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """Name, version and fields: everything but the envelope that emission adds."""
        return {"event": self.EVENT, "schema_version": self.VERSION, **self.fields()}
