"""Regenerate docs/report.png, the README's picture of a real report (``make screenshot``).

Starts the gloo test job whose last rank never joins the final all_reduce
(tests/programs/fr_lag_job.py, CPU only), captures it with the real ``diag capture``, and
photographs the HTML report in headless Chromium. ``--bundle PATH`` photographs the report of
an existing bundle instead (no torch needed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DIAG = [sys.executable, "-m", "diag"]


def capture_live(workdir: Path, ranks: int) -> Path:
    log = workdir / "launcher.log"
    with open(log, "w") as out:
        job = subprocess.Popen(
            [
                sys.executable,
                str(REPO / "tests" / "programs" / "fr_lag_job.py"),
                str(workdir),
                str(ranks),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 180
        while "READY" not in log.read_text():
            if job.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the demo job did not get ready:\n{log.read_text()[-2000:]}")
            time.sleep(0.5)
        bundle = workdir / "capture.json"
        cmd = ["capture", "--pid", str(job.pid), "--count", "4", "--interval", "1"]
        subprocess.run([*DIAG, *cmd, "--log", str(log), "-o", str(bundle)], check=True)
        return bundle
    finally:
        try:
            os.killpg(job.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        job.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bundle", type=Path, help="photograph this bundle's report instead")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "report.png")
    parser.add_argument("--ranks", type=int, default=4)
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium not found: make system-deps")
    with tempfile.TemporaryDirectory(prefix="diag-shot-") as tmp:
        workdir = Path(tmp)
        bundle = args.bundle.resolve() if args.bundle else capture_live(workdir, args.ranks)
        html = workdir / "report.html"
        subprocess.run([*DIAG, "report", str(bundle), "-o", str(html)], check=True)
        flags = [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={workdir / 'profile'}", "--hide-scrollbars",
            "--window-size=1280,1500", f"--screenshot={args.out}",
        ]  # fmt: skip
        args.out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [chromium, *flags, html.as_uri()], check=True, capture_output=True, timeout=120
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
