"""Files in and out: reading, compression by suffix, atomic outputs, JSON lines and the worker pool.

Every command reads and writes through this package, so the rules that keep a user's logs safe
(bounded lines, compression chosen by suffix from one table, temporaries on the books, atomic
renames, hard-link backups, stop signals, one way to start worker processes) are written once.
"""
