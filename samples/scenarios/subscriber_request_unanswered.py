"""deadlocked: the contrast of ``subscriber_quiet_feed`` - the client sends a request the feed
reads and never answers: a reply is owed and never comes."""

from __future__ import annotations

from subscriber_quiet_feed import run

if __name__ == "__main__":
    run(answer=False)
