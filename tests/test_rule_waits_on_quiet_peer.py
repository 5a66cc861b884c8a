"""Rule ``waits_on_quiet_peer`` (``diag.verdict.quiet_peer``, ``FdEnd.owed``): a subscriber
blocked in ``recv`` on a live feed outside the job that owes it nothing is idle - it read
"deadlocked: nothing can wake it", the same as a client whose request is never answered. The
kernel's tcp_info says which side spoke last: a request outstanding (owed) stays deadlocked.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Dict

from recorded_variants import judge_variant as _judge

from diag.bundle.io import load_bundle
from diag.probes.procfs import ProcFS
from diag.probes.sockets import socket_views
from diag.verdict.classify import classify

BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"
Json = Dict[str, Any]


def _raw(name: str) -> Json:
    data: Json = json.loads((BUNDLES / f"{name}.json").read_text())
    data.pop("verdict", None)
    return data


def test_owed_follows_who_spoke_last_on_real_sockets() -> None:
    """A request sent and unanswered: owed; its answer read: not; a connection that only
    receives: not."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    try:

        def owed() -> Any:
            view = socket_views(ProcFS(), [os.getpid()])[os.getpid()]
            return view.owed.get(os.fstat(client.fileno()).st_ino)

        assert owed() is False  # nothing sent yet
        client.sendall(b"GET /quote\n")
        server.recv(64)
        time.sleep(0.05)
        assert owed() is True  # asked, no answer
        time.sleep(0.02)
        server.sendall(b"1.0841\n")
        client.recv(64)
        time.sleep(0.05)
        assert owed() is False  # answered
    finally:
        for s in (client, server, listener):
            s.close()


def test_recorded_subscriber_on_a_quiet_feed_is_idle_naming_the_feed() -> None:
    v = classify(load_bundle(BUNDLES / "subscriber_quiet_feed.json"))
    assert (v.state, v.rule) == ("idle", "waits_on_quiet_peer"), v.summary
    assert "Nothing is owed to it" in v.summary and "outside the job" in v.summary
    assert "nothing can wake" not in v.summary
    assert v.suspects and v.suspects[0].pid != _raw("subscriber_quiet_feed")["target"]["root_pid"]


def test_recorded_request_never_answered_is_deadlocked_naming_who_owes_the_reply() -> None:
    """Rule ``reply_owed``: the client's request is read and never answered by a service
    outside the job that does no work: deadlocked, the service (not the job) named, with how
    long the request has waited (tcp_info's last-data age)."""
    raw = _raw("subscriber_request_unanswered")
    v = classify(load_bundle(BUNDLES / "subscriber_request_unanswered.json"))
    assert (v.state, v.rule) == ("deadlocked", "reply_owed"), v.summary
    assert "which owes it one for " in v.summary and "does no work (0 % of a core)" in v.summary
    assert v.suspects and v.suspects[0].pid != raw["target"]["root_pid"]
    assert "owes pid " in v.suspects[0].reason


def test_recorded_request_being_computed_is_slow() -> None:
    """The contrast: the service burns a core on the request - it computes the reply."""
    v = classify(load_bundle(BUNDLES / "subscriber_request_computing.json"))
    assert (v.state, v.rule) == ("slow", "reply_owed"), v.summary
    assert "it is computing the reply" in v.summary


def test_the_request_age_is_the_kernel_s(tmp_path: Path) -> None:
    """The age said is tcp_info's time since this side last sent, not the capture's length."""
    data = _raw("subscriber_request_unanswered")
    for sample in data["samples"]:
        for ps in sample["processes"]:
            for end in ps.get("fd_ends") or []:
                if end.get("owed"):
                    end["last_sent_s"] = 843.0
    v = _judge(data, tmp_path)
    assert "which owes it one for 14 min 3 s" in v.summary, v.summary


def test_without_tcp_info_nothing_is_known_to_be_owed_or_not(tmp_path: Path) -> None:
    """A bundle written before ``owed`` was recorded (or no tcp_info): as before."""
    data = _raw("subscriber_quiet_feed")
    for sample in data["samples"]:
        for ps in sample["processes"]:
            for end in ps.get("fd_ends") or []:
                end.pop("owed", None)
    v = _judge(data, tmp_path)
    assert (v.state, v.rule) == ("deadlocked", "nothing_can_wake"), v.summary
