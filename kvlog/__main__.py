"""``python -m kvlog`` runs the command line."""

from kvlog.cli import main

main()
