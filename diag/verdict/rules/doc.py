"""docs/rules.md from the rule table: each row's id, family, states, needs, doc, why it outranks
the rows after it, and its examples, in the table's order (the order is the priority).

Pure: it returns the text. Writing the file is ``docs/make_rules.py``'s, and
tests/test_rule_doc.py regenerates the text and compares it with the checked-in file, so a row
changed without its page fails CI.
"""

from __future__ import annotations

from typing import List, Mapping, Sequence

from diag.verdict.rules.base import Rule

_HEADER = """\
# The rule table

<!-- Generated from diag.verdict.rules.TABLE by `python docs/make_rules.py`: do not edit. -->

The verdict is decided by these rules, read top to bottom in the order an on-call engineer
reasons: deaths and stops first, then output that moves, work without output, the wait-for
graph's named shapes, peers and collectives, locks, doors, and a last rule that always
applies. The first row that decides, decides; every later row is still asked, and the verdict
records which would also have matched (`verdict.also_matched`), each with the deciding row's
*outranks* sentence as why it was overruled. Each row's examples are recorded captures it
decides (`tests/test_rule_table.py` fails for a row that decides none, or has none).
"""


def _states(row: Rule) -> str:
    return ", ".join(sorted(row.gives))


def _needs(row: Rule) -> str:
    return ", ".join(sorted(row.needs)) or "-"


def _example(name: str, paths: Mapping[str, str]) -> str:
    where = paths.get(name)
    return f"[`{name}`]({where})" if where else f"`{name}`"


def render_rules_md(table: Sequence[Rule], paths: Mapping[str, str]) -> str:
    """The page. ``paths`` maps an example's name to its file, relative to docs/ (names
    without one are printed unlinked)."""
    out: List[str] = [_HEADER, "| # | rule | family | gives | needs |", "|---|---|---|---|---|"]
    for n, row in enumerate(table, 1):
        out.append(  # GitHub's anchor of "## 3. log_names_dead_rank": 3-log_names_dead_rank
            f"| {n} | [`{row.id}`](#{n}-{row.id}) | {row.family} | {_states(row)} | {_needs(row)} |"
        )
    for n, row in enumerate(table, 1):
        out += ["", f"## {n}. {row.id}", ""]
        out.append(
            f"Family `{row.family}` · gives {_states(row)} · needs {_needs(row)}"
            + (" · the last rule: it always applies" if row.fallback else "")
        )
        out += ["", row.doc, ""]
        if row.outranks:
            out += [f"**Outranks the rows after it:** {row.outranks}.", ""]
        examples = ", ".join(_example(e, paths) for e in row.examples) or "none"
        out.append(f"**Examples:** {examples}")
    return "\n".join(out) + "\n"
