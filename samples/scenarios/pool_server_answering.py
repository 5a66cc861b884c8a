"""progressing (the contrast of ``pool_full_health_answers``): the same server, prober and
access log, with a backend that answers in 50 ms - predictions and health checks both come and
go, and the access log shows both."""

from __future__ import annotations

import _pool_server

if __name__ == "__main__":
    _pool_server.serve(backend_s=0.05)
