"""What the platform can address, and the checks every size and offset passes before a system call.

ctypes and the CUDA bindings convert a Python int to ``size_t`` silently modulo 2**64 (ctypes) or
with an ``OverflowError`` (Cython), so a size the platform cannot address must be refused before it
reaches either: ``mmap(2**64 + 8192)`` is ``mmap(8192)``, and an arena that believes it owns 16 EiB
then hands out views of another mapping's bytes. Every entry point of the memory runtime therefore
converts its integers here, once, into plain ints within ``[minimum, limit]``.

The limit is the user address space of the architecture, not ``SIZE_MAX``: a reservation (with its
guard pages) must fit in it, and CUDA's unified addressing puts device reservations in the same
process address space, so it bounds both backends. Sizes within it leave every sum an arena forms
(offset + size, size + guard pages, rows * row bytes) far below ``SIZE_MAX``.
"""

from __future__ import annotations

import ctypes
import operator
import platform
from typing import Final

from kvlog.memory.errors import ArenaError

SIZE_MAX: Final = (1 << (8 * ctypes.sizeof(ctypes.c_size_t))) - 1
# Bits of user virtual address space the kernel hands out without a hint (x86-64 4-level paging,
# and the largest arm64 configuration); an unknown machine gets the smaller, x86-64 figure.
_USER_VA_BITS: Final = {"x86_64": 47, "amd64": 47, "aarch64": 48, "arm64": 48}
ADDRESS_SPACE_LIMIT: Final = min(1 << _USER_VA_BITS.get(platform.machine().lower(), 47), SIZE_MAX)


def checked_int(
    what: str,
    value: object,
    *,
    minimum: int = 0,
    limit: int = ADDRESS_SPACE_LIMIT,
    error: type[Exception] = ArenaError,
) -> int:
    """``value`` as a plain int in ``[minimum, limit]``, else ``error`` naming ``what`` and the reason.

    bool and float are refused although Python accepts them as numbers: ``True`` bytes or ``4096.0``
    bytes is a caller's mistake, never a size. Integer types that are not ``int`` (numpy's) are
    accepted through ``__index__``.
    """
    if isinstance(value, bool):
        raise error(f"{what} must be an integer, not the bool {value}")
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise error(f"{what} must be an integer, not {type(value).__name__} {value!r:.40}") from None
    if number < minimum:
        raise error(f"{what} {number} must {'not be negative' if minimum == 0 else f'be at least {minimum}'}")
    if number > limit:
        most = "the most this platform can address" if limit == ADDRESS_SPACE_LIMIT else "the most allowed"
        raise error(f"{what} {number} is larger than {limit}, {most}")
    return number


def align_up(value: int, granularity: int) -> int:
    """``value`` rounded up to a whole number of granules: what committing or reserving it really takes."""
    return -(-value // granularity) * granularity


def checked_granularity(value: object, unit: int, unit_name: str, *, power_of_two: bool) -> int:
    """A commit granularity: a positive multiple of ``unit`` (and a power of two if asked), addressable."""
    granularity = checked_int("granularity_bytes", value, minimum=1)
    if granularity % unit:
        raise ArenaError(f"granularity_bytes {granularity} is not a multiple of {unit_name} ({unit} bytes)")
    if power_of_two and granularity & (granularity - 1):
        raise ArenaError(f"granularity_bytes {granularity} is not a power of two")
    return granularity


def checked_range(offset: object, nbytes: object, *, limit: int = ADDRESS_SPACE_LIMIT) -> tuple[int, int]:
    """An ``(offset, nbytes)`` pair of plain ints whose end, ``offset + nbytes``, is within ``limit``."""
    start = checked_int("offset", offset, limit=limit)
    size = checked_int("size", nbytes, limit=limit)
    if start + size > limit:
        raise ArenaError(f"range [{start}, {start} + {size}) ends past {limit}, the most this platform can address")
    return start, size
