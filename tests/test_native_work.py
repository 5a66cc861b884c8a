"""Native work named by its call: a Python thread parked in one native call while native
threads compute for it reads "CPU-bound in native code called from `f`", not in `python`."""

from __future__ import annotations

from series import Proc, Thr, build

from diag.verdict.classify import classify
from diag.verdict.features import extract
from diag.verdict.native_work import native_call

PREP = (("tokenize_shard", "/job/prep.py"), ("main", "/job/prep.py"))


def _pool(main_cpu: float, pool_cpu: float) -> Proc:
    return Proc(
        pid=500,
        role="process",
        stack=PREP,
        cpu_pct=main_cpu,
        state="S",
        wait_timed=False,
        threads=[
            Thr(tid_offset=1, stack=None, cpu_pct=pool_cpu, state="R", name="python"),
            Thr(tid_offset=2, stack=None, cpu_pct=pool_cpu, state="R", name="python"),
        ],
    )


def test_pool_threads_computing_under_one_call_are_named_by_the_call() -> None:
    bundle = build([_pool(0.0, 95.0)], n=3)
    found = native_call(bundle, extract(bundle)[0])
    assert found is not None and found.frame.name == "tokenize_shard"
    assert found.pools == (("python", 2),) and round(found.cpu_pct) == 190
    verdict = classify(bundle)
    assert (verdict.rule, verdict.state) == ("works_silently", "slow"), verdict.summary
    assert [s.pid for s in verdict.suspects] == [500]
    # the wording is the feature: the work is named by the Python call, not the threads' name
    assert "CPU-bound in native code called from `tokenize_shard` (prep.py:" in verdict.summary
    assert "2 native threads (`python` x2)" in verdict.summary
    assert "CPU-bound in `python`" not in verdict.summary


def test_a_python_thread_doing_the_work_keeps_its_frame() -> None:
    bundle = build([_pool(95.0, 15.0)], n=3)
    assert native_call(bundle, extract(bundle)[0]) is None
