"""``python -m diag.mcp.worker watch_status PATH``: one read of a watch's files, in a child.

The MCP server runs it under a deadline (``server.run_child``): loading a large report bundle
or journal must not hang the session. Prints one JSON document; a ``DiagError`` becomes one line
on stderr and its exit code, as in the CLI.
"""

from __future__ import annotations

import sys
from typing import Sequence

from diag.errors import EXIT_USAGE, DiagError


def main(argv: Sequence[str]) -> int:
    from diag.commands.machine_json import watch_status_json

    if len(argv) != 2 or argv[0] != "watch_status":
        print("usage: python -m diag.mcp.worker watch_status PATH", file=sys.stderr)
        return EXIT_USAGE
    try:
        print(watch_status_json(argv[1]))
    except DiagError as exc:
        print(f"diag: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
