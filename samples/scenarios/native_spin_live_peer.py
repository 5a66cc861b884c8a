"""slow: native_spin_dead_peer's contrast - the same native busy-poll on a shared-memory
mailbox, but the peer lives and computes for minutes before it posts: the spin ends then."""

from __future__ import annotations

from native_spin_dead_peer import main

if __name__ == "__main__":
    main(alive=True)
