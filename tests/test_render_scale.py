"""The report at scale (issue 19): past 64 ranks, a call-path tree, odd nodes first."""

from __future__ import annotations

from bench.scale import Shape, make_parts
from diag.bundle.merge import merge_bundles
from diag.commands.capture import judged
from diag.render.html import render_html
from diag.render.markdown import render_markdown
from diag.render.outputs import view_of
from diag.render.view_scale import ScaledReportView


def _view(story: str, hosts: int = 12):
    shape = Shape(hosts, 8, 6, 3)
    parts, missing, _ = make_parts(shape, story)
    bundle = judged(merge_bundles(parts, missing))
    return shape, bundle, view_of(bundle)


def test_diverged_rank_leads_tree_table_and_markdown() -> None:
    shape, bundle, view = _view("diverged")
    assert isinstance(view, ScaledReportView)
    assert bundle.verdict is not None and len(bundle.verdict.suspects) == 1
    suspect = bundle.verdict.suspects[0]
    assert (suspect.host, suspect.rank) == (f"node-{shape.odd_host:04d}", shape.odd_rank)
    # the tree: one shared trunk, the odd branch (one rank) first
    (trunk,) = view.scale.tree
    assert trunk.count == shape.ranks
    first = trunk.children[0]
    assert first.odd and first.count == 1 and first.ranks_text == f"rank {shape.odd_rank}"
    # the node table: the suspect's node first
    assert view.scale.hosts[0].name == suspect.host and "suspect" in view.scale.hosts[0].note
    # only a few ranks are drawn one by one
    assert len(view.matrix.rows) < 16 and len(view.ranks) < 32
    md = render_markdown(view)
    assert (
        md.splitlines()[2]
        == f"**Suspect: {suspect.host}, rank {shape.odd_rank} (pid {suspect.pid})**"
    )
    html = render_html(view)
    banner = html[html.find('<section id="verdict"') : html.find("</section>")]
    assert suspect.host in banner and f"rank {shape.odd_rank}" in banner
    assert '<section id="tree">' in html and '<section id="nodes">' in html


def test_missing_and_clock_nodes_are_listed_first() -> None:
    shape, _, view = _view("missing")
    assert isinstance(view, ScaledReportView)
    assert view.scale.hosts[0].status == "failed"
    assert view.scale.hosts[0].name == f"node-{shape.odd_host:04d}"
    shape, _, view = _view("clock")
    assert isinstance(view, ScaledReportView)
    top = view.scale.hosts[0]
    assert top.name == f"node-{shape.odd_host:04d}" and "clock +5.020 s" in top.note


def test_small_job_is_not_scaled() -> None:
    _, _, view = _view("diverged", hosts=8)  # 64 ranks: as today
    assert not isinstance(view, ScaledReportView)
