"""The MCP server: four tools over stdio, each a bounded run of diag's own commands.

Why child processes: a capture samples for ``interval x count`` seconds and runs py-spy; a
summary may load a day-long journal. Each tool runs ``python -m diag ...`` (or
``diag.mcp.worker``) in a session of its own with a deadline and kills only that child (and
what it started) when the deadline passes - never the job being diagnosed: no tool signals a
target, and the capture only reads it, as ``diag capture`` does. ``list_jobs`` runs in the
same way (``diag ps --json``): it reads /proc only, but a read of a process's argv waits for
that process's memory lock, which a process stuck in the kernel can hold for ever.

Every answer is the ``--json`` document (``diag.commands.machine_json``), scrubbed by the
command that made it and once more here (``Redactor.scrub_obj``), so no secret of a target's
environment or argv reaches the agent.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Annotated, Any, Dict, List, Optional, Sequence

from pydantic import Field  # the MCP SDK's own dependency: tool inputs are validated by it

from diag.bundle.files import NotRegularFile
from diag.bundle.io import MAX_BUNDLE_BYTES
from diag.errors import EXIT_USAGE, DiagError
from diag.mcp.paths import checked_file, ensure_out_dir, fresh_private_dir, report_base
from diag.probes.pychild import TRUSTED_CWD, python_module_argv, signal_on_parent_death
from diag.redaction.redact import Redactor

CAPTURE_SLACK_S = 90.0  # py-spy, NVML, writing the reports, on top of interval x count
SUMMARY_TIMEOUT_S = 120.0
# A read of /proc/PID/cmdline or environ waits for the process's mmap lock, which a process
# stuck in the kernel (D state, a dead NFS mount) may hold for ever - as `ps` hangs on such a
# host. So the scan, too, runs in a child under a deadline.
LIST_TIMEOUT_S = 30.0
OUTPUT_MAX_BYTES = 4 << 20  # of a child's stdout kept: one JSON document
MAX_INTERVAL_S = 60.0
MAX_COUNT = 20
MAX_PID = 1 << 22  # the kernel's pid_max ceiling

INSTRUCTIONS = (
    "diag tells whether a multi-rank ML job (torchrun, SGLang, vLLM, Ray, a serving stack) is "
    "progressing, slow, idle, deadlocked or exited, and why. Start with list_jobs (no PID "
    "needed), then capture the job's root pid; for a job under `diag watch`, watch_status "
    "reads its latest verdict without touching the job. Trust the verdict and its evidence "
    "over surface signs: a silent log, futex waits, 0% GPU utilisation or 100% CPU alone prove "
    "nothing - weight loading, compilation and idle servers look exactly like hangs that way. "
    "Do not kill a job because it looks stuck; the verdict says when killing helps and which "
    "process to look at. No tool here signals or kills a target."
)
LIST_JOBS_DOC = (
    "List the ML jobs on this host without a PID: process trees with ranks (RANK/LOCAL_RANK), "
    "launchers (torchrun, mpirun, vllm serve, sglang.launch_server), framework titles "
    "(sglang::scheduler_TP0, VLLM::EngineCore, ray::), serving stacks (uvicorn, gunicorn) or "
    "GPU processes. Per job: root_pid (the pid to capture), kind, command (secrets redacted), "
    "ranks, processes, age_s, listening ports, GPUs, how many processes run/sleep/are stopped "
    "or zombies, CPU now. A first look only (/proc, no stacks): 'sleeping' and low CPU do NOT "
    "mean hung, a stopped (T) or zombie (Z) member is worth a capture. Use capture for a "
    "verdict."
)
CAPTURE_DOC = (
    "Diagnose one job: sample every process of the tree rooted at pid `count` times, "
    "`interval_s` apart (Python stacks, kernel waits, CPU, I/O, sockets, GPU, logs), and judge "
    "it. Returns the verdict as JSON: state (progressing/slow/idle/deadlocked/exited), "
    "confidence, verdict (one sentence with the remedy), rule (the deciding rule), suspects "
    "(pids, ranks, why), eta_s for a start-up phase, and report paths (HTML/Markdown/JSON "
    "bundle). Takes about interval_s x count seconds. Read-only: never kills or signals the job "
    "(py-spy reads stacks). Do not conclude 'deadlocked' from a quiet log or idle GPU - read "
    "state and the suspects; 'slow' with an ETA means wait. Capture again to see change."
)
SUMMARY_DOC = (
    "Summarise an existing diag bundle (.json) or watch journal (.jsonl) as the same JSON "
    "verdict document capture returns (judged now if the file has no verdict: "
    "verdict_source='computed'). Reads the file only. A journal's verdict covers its whole "
    "span; for what a running watch sees now use watch_status."
)
WATCH_STATUS_DOC = (
    "The latest verdict (and start-up ETA) of a running `diag watch`: pass its report or "
    "journal path (PATH.html, PATH.json or PATH.jsonl). Reads the report bundle the watch "
    "rewrites after each sample (the verdict of its recent window) and says how long ago the "
    "journal grew and whether the watch ended (complete=true). A watch that stopped writing "
    "is not proof the job stopped. Reads files only; never touches the job."
)


def _fail(message: str) -> Exception:
    from mcp.server.mcpserver.exceptions import ToolError

    return ToolError(" ".join(Redactor().scrub(message).split()))


_TERM_WITH_SERVER = signal_on_parent_death(signal.SIGTERM)


def run_child(argv: Sequence[str], timeout_s: float, cwd: Optional[Path] = None) -> Dict[str, Any]:
    """Run a diag child; its stdout's one JSON document, scrubbed. A deadline kills the
    child's own session (diag, its py-spy and NVML worker), nothing else. The child runs in
    ``cwd`` (the private output directory) or ``/``, never the server's own cwd: ``python -m``
    would import from there (``probes.pychild``)."""
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=str(cwd) if cwd else TRUSTED_CWD,
        start_new_session=True,
        # The server gone (its client closed the session: SIGTERM, or it was killed), the
        # child is told as a user's Ctrl-C would: a capture writes what it took and exits,
        # a summary just ends. Nothing is left running for nobody to read.
        preexec_fn=_TERM_WITH_SERVER,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:  # a child stuck in the kernel (state D) may outlive SIGKILL: do not wait on it
            proc.communicate(timeout=5.0)
        except subprocess.TimeoutExpired:
            pass
        raise _fail(
            f"diag did not finish within {timeout_s:.0f} s; the job was not touched"
        ) from exc
    text = out[:OUTPUT_MAX_BYTES].decode("utf-8", "replace").strip()
    if proc.returncode not in (0, 10) or not text:
        lines = err.decode("utf-8", "replace").strip().splitlines()
        raise _fail(lines[-1] if lines else f"diag exited with code {proc.returncode}")
    try:
        doc = json.loads(text.splitlines()[-1])
    except ValueError:
        raise _fail("diag printed no JSON document") from None
    scrubbed: Dict[str, Any] = Redactor().scrub_obj(doc)
    return scrubbed


def _diag(*args: str) -> List[str]:
    return [*python_module_argv("diag"), *args]


def _checked_file(candidate: Path, shown: str) -> None:
    """``candidate`` is a regular file within the size a bundle may have, checked on a handle
    opened without blocking (``mcp.paths.checked_file``): a FIFO or a device is refused at
    once in one line, not read by a child until its deadline."""
    try:
        size = checked_file(candidate)
    except NotRegularFile as exc:
        raise _fail(f"{shown}: {str(exc).replace(str(candidate) + ' ', '')}") from None
    except OSError as exc:
        raise _fail(
            f"{shown}: {exc.strerror or exc} (give the path of a diag .json bundle or .jsonl)"
        ) from None
    if size > MAX_BUNDLE_BYTES:
        raise _fail(f"{shown}: larger than the {MAX_BUNDLE_BYTES >> 20} MiB a bundle may be")


def _existing_file(path: str) -> Path:
    candidate = Path(path).expanduser().absolute()  # the child runs from another directory
    if "\0" in path:
        raise _fail("a path cannot hold a NUL byte")
    _checked_file(candidate, path)
    return candidate


class Tools:
    """The tools' bodies, plain functions of validated arguments (tested without MCP too)."""

    def __init__(self, out_dir: Optional[Path] = None) -> None:
        # --out-dir as given (checked by each capture as -o is), or None: a fresh private
        # directory made at the first capture (``mcp.paths``), kept for the session.
        self._out_dir = out_dir.expanduser().absolute() if out_dir is not None else None
        self._lock = threading.Lock()  # tools run in worker threads, captures at once

    def out_dir(self) -> Path:
        with self._lock:
            try:
                if self._out_dir is None:
                    self._out_dir = fresh_private_dir()
                else:
                    ensure_out_dir(self._out_dir)
            except DiagError as exc:
                raise _fail(exc.one_line()) from None
            return self._out_dir

    def list_jobs(self) -> Dict[str, Any]:
        return run_child(_diag("ps", "--json"), LIST_TIMEOUT_S)

    def capture(self, pid: int, interval_s: float, count: int) -> Dict[str, Any]:
        if not 1 <= pid <= MAX_PID or pid == os.getpid():
            raise _fail(f"pid {pid}: not a process diag may capture (use list_jobs)")
        if not 0.0 <= interval_s <= MAX_INTERVAL_S or not 1 <= count <= MAX_COUNT:
            raise _fail(f"interval_s in [0, {MAX_INTERVAL_S:g}], count in [1, {MAX_COUNT}]")
        out_dir = self.out_dir()
        args = _diag("capture", "--pid", str(pid), "--interval", f"{interval_s:g}")
        args += ["--count", str(count), "--json", "-o", str(report_base(out_dir, pid))]
        return run_child(args, interval_s * count + CAPTURE_SLACK_S, cwd=out_dir)

    def summary(self, path: str) -> Dict[str, Any]:
        bundle = _existing_file(path)
        return run_child(_diag("summary", "--json", str(bundle)), SUMMARY_TIMEOUT_S)

    def watch_status(self, path: str) -> Dict[str, Any]:
        if "\0" in path:
            raise _fail("a path cannot hold a NUL byte")
        stem = Path(path).expanduser().absolute().with_suffix("")
        found = [stem.with_suffix(ext) for ext in (".json", ".jsonl")]
        found = [p for p in found if os.path.lexists(p)]
        if not found:
            raise _fail(f"{path}: no watch journal or report bundle there (PATH.jsonl/.json)")
        for candidate in found:  # each one the child would open: a FIFO there is refused now
            _checked_file(candidate, str(candidate))
        argv = [*python_module_argv("diag.mcp.worker"), "watch_status", str(stem)]
        return run_child(argv, SUMMARY_TIMEOUT_S)


def build_server(out_dir: Optional[Path] = None) -> Any:
    """The MCPServer with diag's four tools (returned as Any: the SDK is imported lazily, so
    the rest of diag never pays for it)."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.types import ToolAnnotations
    except ImportError as exc:
        raise DiagError(
            f"the MCP SDK is not installed ({exc})",
            "pip install 'mcp>=2' into diag's environment (it is a dependency of diag)",
            EXIT_USAGE,
        ) from exc
    from diag import __version__

    tools = Tools(out_dir)
    server = MCPServer("diag", version=__version__, instructions=INSTRUCTIONS)
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)

    @server.tool(description=LIST_JOBS_DOC, annotations=read_only)
    def list_jobs() -> Dict[str, Any]:
        return tools.list_jobs()

    @server.tool(description=CAPTURE_DOC, annotations=read_only)
    def capture(
        pid: Annotated[int, Field(ge=1, le=MAX_PID, description="root pid from list_jobs")],
        interval_s: Annotated[float, Field(ge=0.0, le=MAX_INTERVAL_S)] = 2.0,
        count: Annotated[int, Field(ge=1, le=MAX_COUNT)] = 3,
    ) -> Dict[str, Any]:
        return tools.capture(pid, interval_s, count)

    @server.tool(description=SUMMARY_DOC, annotations=read_only)
    def summary(
        path: Annotated[str, Field(min_length=1, max_length=4096, description="bundle path")],
    ) -> Dict[str, Any]:
        return tools.summary(path)

    @server.tool(description=WATCH_STATUS_DOC, annotations=read_only)
    def watch_status(
        path: Annotated[str, Field(min_length=1, max_length=4096, description="watch's PATH")],
    ) -> Dict[str, Any]:
        return tools.watch_status(path)

    return server


def run_mcp(out_dir: Optional[Path] = None) -> None:
    """``diag mcp``: serve until the client closes stdin."""
    build_server(out_dir).run("stdio")
