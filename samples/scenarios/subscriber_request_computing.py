"""slow: the contrast of ``subscriber_request_unanswered`` - the same client's request is
read by a service outside the job that burns a core computing the answer: a reply is owed and
the one who owes it works on it."""

from __future__ import annotations

from subscriber_quiet_feed import run

if __name__ == "__main__":
    run(answer=False, compute=True)
