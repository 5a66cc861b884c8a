"""The report's sections an evidence line may link to are one closed set
(``diag.vocab.ReportSection``, which the verdict's collective findings are typed with), and the
report titles each of them (``diag.render.build.SECTIONS``)."""

from __future__ import annotations

from diag.render.build import SECTIONS
from diag.vocab import REPORT_SECTIONS


def test_the_report_titles_every_section_and_no_other() -> None:
    assert set(SECTIONS) == set(REPORT_SECTIONS)
