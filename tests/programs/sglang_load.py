"""``startup_load.py`` under a name like SGLang's server (``--watchdog-timeout`` in its argv)."""

from __future__ import annotations

import runpy
from pathlib import Path

if __name__ == "__main__":
    runpy.run_path(str(Path(__file__).with_name("startup_load.py")), run_name="__main__")
