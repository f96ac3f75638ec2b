"""Every exception ``kvlog check`` raises, in one module (as httpx's ``_exceptions.py``).

The check layer's modules (the git reader, the project resolver, the file reader, the draft reader)
raise each other's errors; a leaf they all import keeps them from importing each other for it.
"""

from __future__ import annotations

from pathlib import Path

from kvlog.errors import KvlogError


class GitError(KvlogError):
    """git is missing, the directory is not in a repository, or the ref names no commit."""


class GitNotFound(GitError):
    """There is no git to run."""


class NotACommit(GitError):
    """The ref names no commit of the repository that holds the directory."""

    def __init__(self, ref: str, directory: Path) -> None:
        super().__init__(f"{ref}: not a commit in the repository holding {directory}")
        self.ref = ref
        self.directory = directory


class ConfigError(KvlogError):
    """The path to check holds no catalog, or its ``[tool.kvlog]`` table is malformed."""


class Refused(Exception):
    """A catalog file kvlog check will not read, and why (the caller names the file)."""


class SchemaError(ValueError):
    """A schema that cannot be read: the message says where and why."""


__all__ = ["ConfigError", "GitError", "GitNotFound", "NotACommit", "Refused", "SchemaError"]
