"""deadlocked: the contrast of ``tcp_peer_unreachable`` - the service's host is up but its
process is SIGSTOPped: its kernel acknowledges the request (nothing in flight, no
retransmission), the process never reads it. A stopped process, not a dead link."""

from __future__ import annotations

from tcp_peer_unreachable import run

if __name__ == "__main__":
    run(stop=True)
