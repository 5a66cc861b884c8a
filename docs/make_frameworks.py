"""Regenerate the field tables of docs/frameworks.md from diag/frameworks/base.py
(``python docs/make_frameworks.py``).

Each record of base.py (``Pack``, ``Clock``, ``RoleSign``, ``FrameSign``, ``FrameWait``,
``NativeProgress``) gets a table: its fields, their types, and what each means - the comment
lines above the field and the comment after it, as base.py writes them. The tables sit
between ``<!-- fields:begin -->`` and ``<!-- fields:end -->``; the prose around them is
hand-written. ``--check`` writes nothing and exits 1 when the page differs (what CI runs,
through tests/test_frameworks.py).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path
from typing import List, Sequence, Tuple

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "frameworks.md"
BASE = REPO / "diag" / "frameworks" / "base.py"
BEGIN = "<!-- fields:begin -->"
END = "<!-- fields:end -->"


def _comment_above(lines: Sequence[str], lineno: int) -> List[str]:
    """The ``#`` lines right above line ``lineno`` (1-based), in order."""
    out: List[str] = []
    i = lineno - 2
    while i >= 0 and lines[i].strip().startswith("#"):
        text = lines[i].strip().lstrip("#").strip()
        if text.startswith("---"):  # a section rule: "# --- its waits"
            break
        out.insert(0, text)
        i -= 1
    return out


def _comment_after(line: str) -> str:
    """The comment after a field on its own line (outside any string)."""
    tokens = line.split("  # ", 1)
    return tokens[1].strip() if len(tokens) == 2 else ""


def fields(source: str) -> List[Tuple[str, str, List[Tuple[str, str, str]]]]:
    """(record, its docstring's first paragraph, [(field, type, meaning)]) per dataclass."""
    lines = source.splitlines()
    out = []
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        rows = []
        group = ""  # a comment above a run of fields (no blank line) speaks for each
        previous = 0
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                kind = ast.get_source_segment(source, item.annotation) or ""
                above = " ".join(_comment_above(lines, item.lineno))
                if above:
                    group = above
                elif item.lineno != previous + 1:
                    group = ""
                after = _comment_after(lines[item.lineno - 1])
                meaning = " ".join(
                    w for w in (above or (group and "(with the above) " + group), after) if w
                )
                rows.append((item.target.id, kind, meaning))
                previous = item.end_lineno or item.lineno
        if rows:
            doc = (ast.get_docstring(node) or "").split("\n\n")[0].replace("\n", " ")
            out.append((node.name, doc, rows))
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def tables(source: str) -> str:
    parts = []
    for record, doc, rows in fields(source):
        parts.append(f"### `{record}`\n\n{_cell(doc)}\n")
        parts.append("| field | type | what it means |\n|---|---|---|")
        for name, kind, meaning in rows:
            parts.append(f"| `{name}` | `{_cell(kind)}` | {_cell(meaning)} |")
        parts.append("")
    return "\n".join(parts)


def render(page: str) -> str:
    """``page`` with its generated part replaced by the tables of base.py as it is now."""
    head, _, rest = page.partition(BEGIN)
    _, _, tail = rest.partition(END)
    body = tables(BASE.read_text(encoding="utf-8"))
    return f"{head}{BEGIN}\n{body}\n{END}{tail}"


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    args = parser.parse_args(list(argv))
    page = PAGE.read_text(encoding="utf-8")
    new = render(page)
    if args.check:
        return 0 if new == page else 1
    PAGE.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
