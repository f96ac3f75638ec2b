"""``python -m mutation_tool`` (what ``scripts/mutation`` runs)."""

from mutation_tool.cli import main

raise SystemExit(main())
