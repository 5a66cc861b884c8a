"""``python -m diag`` runs the CLI (tests use it to run diag as a user would)."""

from diag.cli import main

main()
