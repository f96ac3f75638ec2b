"""Text: the template language, today's wording, the console line and servers' line prefixes.

One template language both renders events as lines and parses lines back into events, so the wording a
server printed and the wording kvlog prints cannot drift apart. The prefix a server puts before its
message (``[2026-01-02 03:04:05 TP0] ``) is built and parsed here, for every server. Part of the logging
core: no torch, no migration, check or CLI imports.
"""
