"""Files in and out: reading (compressed or not), atomic outputs, JSON lines and the worker pool.

Every command reads and writes through this package, so the rules that keep a user's logs safe
(bounded lines, compression chosen by suffix, temporaries on the books, atomic renames, hard-link
backups, stop signals) are written once.
"""
