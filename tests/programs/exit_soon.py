"""Prints READY, then exits with code 0 after ``sys.argv[1]`` seconds (a target that ends
in the middle of a capture)."""

from __future__ import annotations

import sys
import time

print("READY", flush=True)
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
