"""Regenerate docs/rules.md from the rule table (``python docs/make_rules.py``).

``--check`` writes nothing and exits 1 when the checked-in page differs (what CI runs, through
tests/test_rule_doc.py). Examples link to their recorded bundles (samples/bundles/,
tests/golden/bundles/) or, for a fixture, to tests/rule_fixtures.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Dict, Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "rules.md"
BUNDLE_DIRS = ("samples/bundles", "tests/golden/bundles")
FIXTURES = "tests/rule_fixtures.py"


def example_paths() -> Dict[str, str]:
    """Every example name a row may give, to its file relative to docs/."""
    from diag.verdict.rules import TABLE
    from diag.verdict.rules.base import FIXTURE_PREFIX

    paths: Dict[str, str] = {}
    for folder in BUNDLE_DIRS:
        for bundle in sorted((REPO / folder).glob("*.json")):
            paths.setdefault(bundle.stem, f"../{folder}/{bundle.name}")
    for row in TABLE:
        for name in row.examples:
            if name.startswith(FIXTURE_PREFIX):
                paths[name] = f"../{FIXTURES}"
    return paths


def page() -> str:
    from diag.verdict.rules import TABLE
    from diag.verdict.rules.doc import render_rules_md

    return render_rules_md(TABLE, example_paths())


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args(argv)
    text = page()
    if args.check:
        current = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
        if current != text:
            print(f"{PAGE} is stale: run python docs/make_rules.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
