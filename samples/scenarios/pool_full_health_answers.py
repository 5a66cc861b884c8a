"""slow, not "progressing: log access.log grew 3 lines" nor "progressing: answers short
requests": an inference server's 2-thread pool is full - both workers sleep inside
``slow_backend`` (a backend that takes 5 min), the 6 ``/predict`` requests wait in
``Future.result`` - while ``/health`` is answered every second and logged. The health checks
are the only requests that come and go; the job's work waits for the sleeps to end.
Contrast: ``pool_server_answering`` (the backend answers in 50 ms: progressing)."""

from __future__ import annotations

import _pool_server

if __name__ == "__main__":
    _pool_server.serve(backend_s=300.0)
