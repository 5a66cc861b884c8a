"""slow: one C call holding the GIL - a catastrophic-backtracking regex. One identical stack
and 100% CPU for a long time: busy, not deadlocked."""

from __future__ import annotations

import re

PATTERN = re.compile(r"^(a+)+$")


def validate_token(token: str) -> bool:
    return PATTERN.match(token) is not None


def main() -> None:
    token = "a" * 40 + "!"  # 2**40 backtracking steps: hours
    print("READY", flush=True)
    validate_token(token)


if __name__ == "__main__":
    main()
