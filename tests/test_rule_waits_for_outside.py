"""Rule ``waits_for_outside``'s doors: a framework's API server keeps its port in the idle
sentence even when its main thread is caught running (no wait to read).
"""

from __future__ import annotations


def test_api_server_caught_running_keeps_its_port() -> None:
    """CI once read SGLang TP 2 idle with the HTTP front end's main thread running at the last
    sample (no wait to read): its port went missing and the summary named only scheduler TP0's
    store port. The framework's API server keeps its door, and the door comes first."""
    import json
    import tempfile
    from pathlib import Path

    from conftest import REPO

    from diag.bundle.io import load_bundle
    from diag.commands.judge import judge

    raw = json.loads((REPO / "samples/bundles/sglang_real_tp2_sleep_idle.json").read_text())
    root = raw["samples"][-1]["processes"][0]
    http = root["listen_ports"][0]
    root["threads"][0].update(stack_id=None, state="R", wchan=None, syscall=None)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "b.json"
        path.write_text(json.dumps(raw))
        verdict = judge(load_bundle(path))
    assert verdict.state == "idle", verdict.summary
    assert f"waits on a peer, :{http}," in verdict.summary, verdict.summary
