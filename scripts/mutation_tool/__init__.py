"""Mutation testing of kvlog's core modules (``scripts/mutation``; configuration in ``scripts/mutation.toml``).

Each mutant is one small AST edit of a module in scope (a comparison flipped, an operator swapped, a
constant moved by one, ``True``/``False`` or ``and``/``or`` swapped, ``return None``, a statement
deleted, ``break``/``continue`` swapped), written in place in a copy of the project, and run against the
tests that can notice it: those whose coverage in an unmutated baseline reaches its line, every test that
starts a Python subprocess, and the module's whole selection for code that runs at import.
"""
