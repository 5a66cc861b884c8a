"""The line protocol between ``diag capture --slurm-job`` and its per-node collectors.

Why lines this short: srun forwards a task's stdout in messages of at most 1 KiB
(``SLURM_IO_MAX_MSG_LEN``) and keeps only *lines* whole, so lines from different nodes can
interleave but a short line is never cut. Every line starts with ``DIAG1`` (anything else a
node prints is ignored) and names its node:

    DIAG1 hello NODE NODE_T                 node started (its clock)
    DIAG1 ping CTRL_T                       controller -> every node, through srun's stdin
    DIAG1 stop                              controller -> every node: finish, send the bundle
    DIAG1 tick NODE INDEX ALIVE             a sample was taken (ALIVE processes alive)
    DIAG1 pong NODE CTRL_T NODE_T           the node's clock when the ping arrived
    DIAG1 chunk NODE SEQ TOTAL DATA         part SEQ of TOTAL of the bundle (zlib, base64)
    DIAG1 note NODE MESSAGE                 something the user should know (ptrace denied...)
    DIAG1 error NODE MESSAGE                the node could not capture (one line, redacted)
    DIAG1 done NODE                         nothing more will come from NODE

Clock offset per node (NTP's estimate): offset = node_t - (ctrl_t + recv_t) / 2 with an
error of at most half the round trip; the pong with the shortest round trip is kept.

A node's bundle is decoded the moment its last chunk arrives and its chunks are dropped, while
the other nodes are still sampling: what the controller holds is one decoded bundle per node
that finished plus the chunks of those still sending, and when the last node is done only the
merge is left (it is a pure function of the decoded parts: ``bundle.merge``).
"""

from __future__ import annotations

import base64
import re
import zlib
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import msgspec

from diag.bundle.merge import HostPart, MissingHost
from diag.model import Bundle

TAG = "DIAG1"
PING = f"{TAG} ping"
STOP = f"{TAG} stop"
CHUNK_CHARS = 800  # + header stays well under srun's 1024-byte message
CLOCK_SOURCE = "srun-ping"

_decoder = msgspec.json.Decoder(Bundle)
_LAUNCH_FAILED = re.compile(r"Task launch for \S+ failed on node ([^\s:]+)")
# srun's line for a task that died of a signal: "srun: error: NODE: task 5: Killed" (also
# "tasks 0-3: Terminated"): slurmstepd ended the step there, or the kernel killed the task.
_TASK_SIGNALLED = re.compile(r"srun: error: ([^\s:]+): tasks? [\d,\-\[\]]+: (Killed|Terminated)")


def encode_chunks(node: str, bundle_json: bytes) -> Iterator[str]:
    """The bundle as ``chunk`` lines (without newlines)."""
    data = base64.b64encode(zlib.compress(bundle_json, 6)).decode("ascii")
    pieces = [data[i : i + CHUNK_CHARS] for i in range(0, len(data), CHUNK_CHARS)] or [""]
    for seq, piece in enumerate(pieces):
        yield f"{TAG} chunk {node} {seq} {len(pieces)} {piece}"


def decode_chunks(chunks: Dict[int, str], total: int) -> Bundle:
    data = "".join(chunks[i] for i in range(total))
    return _decoder.decode(zlib.decompress(base64.b64decode(data)))


class _Node:
    __slots__ = ("broken", "bundle", "chunks", "done", "done_recv_s", "errors", "hello_recv_s",
                 "hello_s", "notes", "pongs", "tick", "total")  # fmt: skip

    def __init__(self) -> None:
        self.hello_s: Optional[float] = None
        # When its first and last lines arrived (our clock): where a fan-out's time went.
        self.hello_recv_s: Optional[float] = None
        self.done_recv_s: Optional[float] = None
        self.pongs: List[Tuple[float, float, float]] = []  # ctrl_t, node_t, recv_t
        self.chunks: Dict[int, str] = {}  # until the last one arrives (kept if unreadable)
        self.total: Optional[int] = None
        self.bundle: Optional[Bundle] = None  # decoded as soon as every chunk is in
        self.broken = ""  # why the chunks, all in, are no bundle
        self.errors: List[str] = []
        self.notes: List[str] = []
        self.tick: Optional[Tuple[int, int]] = None  # last sample index, processes alive
        self.done = False


class Gathered:
    """What came back from srun, put together per node. ``feed`` is pure bookkeeping, so the
    parsing is tested on recorded output."""

    def __init__(self, nodes: Sequence[str]) -> None:
        self.expected: Tuple[str, ...] = tuple(nodes)
        self.nodes: Dict[str, _Node] = {n: _Node() for n in nodes}
        self.stderr: List[str] = []
        self.returncode: Optional[int] = None
        self.timed_out = False
        self.elapsed_s = 0.0

    def feed(self, line: str, recv_s: float) -> Optional[str]:
        """Take one stdout line; returns its kind ("hello", "pong", ...) or None if not ours."""
        at = line.find(TAG + " ")
        if at < 0:
            return None
        fields = line[at:].rstrip("\r\n").split(" ", 3)
        if len(fields) < 3:
            return None
        kind, name = fields[1], fields[2]
        node = self.nodes.setdefault(name, _Node())
        rest = fields[3] if len(fields) > 3 else ""
        try:
            if kind == "hello":
                node.hello_s = float(rest)
                node.hello_recv_s = recv_s
            elif kind == "pong":
                ctrl, node_t = rest.split()
                node.pongs.append((float(ctrl), float(node_t), recv_s))
            elif kind == "chunk":
                seq, total, data = [*rest.split(" ", 2), ""][:3]
                if node.bundle is None and not node.broken:
                    node.total = int(total)
                    node.chunks[int(seq)] = data.strip()
                    self._complete(node)
            elif kind == "error":
                node.errors.append(rest)
            elif kind == "tick":
                index, alive = rest.split()
                node.tick = (int(index), int(alive))
            elif kind == "note":
                node.notes.append(rest)
            elif kind == "done":
                node.done = True
                node.done_recv_s = recv_s
            else:
                return None
        except ValueError:
            return None
        return kind

    def launch_failures(self) -> List[str]:
        """Nodes srun could not start a task on ("Task launch for StepId=J.S failed on node
        NODE: ..."): unreachable, slurmd down."""
        names: List[str] = []
        for line in self.stderr:
            match = _LAUNCH_FAILED.search(line)
            if match and match.group(1) not in names:
                names.append(match.group(1))
        return names

    def signalled(self) -> List[str]:
        """Nodes whose collector died of SIGKILL or SIGTERM (srun's "NODE: task N: Killed")
        before sending its bundle: killed from outside - its step ended there (the job
        ending, a node failure) or the kernel's OOM killer - not a collector that failed."""
        names: List[str] = []
        for line in self.stderr:
            match = _TASK_SIGNALLED.search(line)
            name = match.group(1) if match else ""
            node = self.nodes.get(name)
            if node is not None and name not in names and node.bundle is None and not node.errors:
                names.append(name)
        return names

    def signal_line(self, name: str) -> str:
        """srun's own line for the signal that ended ``name``'s task ("" if none): quoted
        rather than any stderr line naming the node, which a task's own output could be."""
        said = [m.group(0) for line in self.stderr if (m := _TASK_SIGNALLED.search(line))]
        return next((t for t in reversed(said) if t.startswith(f"srun: error: {name}:")), "")

    def progress(self) -> Optional[Tuple[int, int, int]]:
        """(samples every node has taken, nodes, processes alive); None until every node that
        has not failed has taken one."""
        live = [self.nodes[n] for n in self.expected if not self.nodes[n].errors]
        ticks = [n.tick for n in live]
        if not ticks or any(t is None for t in ticks):
            return None
        done = [t for t in ticks if t is not None]
        return min(t[0] for t in done) + 1, len(done), sum(t[1] for t in done)

    def notes(self) -> List[str]:
        return [f"{name}: {note}" for name, node in self.nodes.items() for note in node.notes]

    def all_done(self) -> bool:
        return all(self.nodes[n].done for n in self.expected)

    def min_pongs(self) -> int:
        counts = [len(n.pongs) for n in self.nodes.values() if n.hello_s is not None]
        return min(counts) if counts else 0

    @staticmethod
    def clock(node: _Node) -> Tuple[Optional[float], Optional[float]]:
        """(offset, error bound) from the pong with the shortest round trip."""
        if not node.pongs:
            return None, None
        ctrl, node_t, recv = min(node.pongs, key=lambda p: p[2] - p[0])
        return round(node_t - (ctrl + recv) / 2, 6), round(max(recv - ctrl, 0.0) / 2, 6)

    @staticmethod
    def _complete(node: _Node) -> None:
        """Decode the bundle once its last chunk is in, and let the chunks go."""
        total = node.total
        if total is None or len(node.chunks) < total:
            return
        if any(i not in node.chunks for i in range(total)):
            return
        try:
            node.bundle = decode_chunks(node.chunks, total)
        except (ValueError, zlib.error, msgspec.DecodeError, msgspec.ValidationError) as exc:
            node.broken = f"bundle unreadable ({type(exc).__name__}: {exc})"
            return
        node.chunks = {}

    def _bundle(self, node: _Node) -> Tuple[Optional[Bundle], str]:
        if node.total is None or node.bundle is not None or node.broken:
            return node.bundle, node.broken
        return None, f"bundle cut short ({len(node.chunks)} of {node.total} parts arrived)"

    def parts(self) -> List[HostPart]:
        out: List[HostPart] = []
        for name, node in self.nodes.items():
            bundle, _ = self._bundle(node)
            if bundle is None:
                continue
            offset, error = self.clock(node)
            out.append(
                HostPart(
                    bundle=bundle,
                    label=name,
                    clock_offset_s=offset,
                    clock_offset_error_s=error,
                    clock_source=CLOCK_SOURCE if offset is not None else "",
                )
            )
        return out

    def missing(self, limit_s: float) -> List[MissingHost]:
        out: List[MissingHost] = []
        for name, node in self.nodes.items():
            bundle, broken = self._bundle(node)
            if bundle is not None:
                continue
            out.append(MissingHost(name=name, reason=self._reason(name, node, broken, limit_s),
                                   duration_s=round(self.elapsed_s, 3)))  # fmt: skip
        return out

    def _reason(self, name: str, node: _Node, broken: str, limit_s: float) -> str:
        if node.errors:
            return "; ".join(node.errors)
        if broken:
            return broken
        tail = [line.strip() for line in self.stderr if line.strip()][-2:]
        if self.timed_out and not node.done:
            seen = "started but sent no bundle" if node.hello_s is not None else "never started"
            said = f"; srun said: {' | '.join(tail)}" if tail else ""
            return f"timed out after {limit_s:g}s ({seen}){said}"
        about = [line.strip() for line in self.stderr if name in line]
        if about:
            text = " | ".join(about[-3:])
            return text if text.startswith("srun") else f"srun: {text}"
        why = f"srun exit code {self.returncode}" if self.returncode is not None else "no output"
        return f"no bundle from the node ({why}{': ' + ' | '.join(tail) if tail else ''})"
