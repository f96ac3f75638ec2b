"""``with`` support for everything in the memory runtime that holds memory until it is closed."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Self


class ClosesOnExit:
    """Closes the object when a ``with`` block ends, however it ends: memory must never outlive its block."""

    def close(self) -> None:
        """Give back what the object holds; subclasses define it."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
