"""``python -m diag`` runs the CLI (tests use it to run diag as a user would).

``-m`` put the current directory first on ``sys.path``; it goes before anything else is imported,
so a ``click.py`` or ``msgspec.py`` in the directory root runs ``python -m diag`` from (a job's,
a shared one) is never imported as root (issue #32). ``diag`` itself was found already; a
planted ``diag/`` there is why diag's own children run with ``-P`` (``probes.pychild``)."""

import os
import sys

if not getattr(sys.flags, "safe_path", False) and sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from diag.cli import main  # after the cwd left sys.path

main()
