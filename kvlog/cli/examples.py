"""The Examples section every command's ``--help`` ends with (a test holds every command to it)."""

from __future__ import annotations


def examples(*lines: str) -> str:
    r"""A click epilog listing command lines as written, one a line (``\b``: click does not rewrap them)."""
    return "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in lines)
