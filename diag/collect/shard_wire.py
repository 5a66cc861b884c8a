"""How the Collector and its forked workers talk (``diag.collect.shards``), and the worker's loop.

A round's work is posted, not handed out. The Collector writes the round's job list once on a
board (a memfd every worker inherited) and then one ticket per job - (round, index), 8 bytes -
on a pipe all workers read. A worker that is free takes the next ticket itself, so the work
spreads by each worker's speed (this VM's two vCPUs differ by ~1.5x) and never waits for the
Collector to hand out the next job: handing out had made workers idle for milliseconds at a
time whenever the Collector's threads held its interpreter lock. A ticket is smaller than
PIPE_BUF and read whole, so two workers never split one. Each answer goes back as a
length-prefixed msgpack frame on the worker's own pipe.

A worker holds a process whose running threads' native locations are still being sampled
(``ProcessReader.begin``: a perf window of 8-24 ms, spent asleep) and takes the next ticket
meanwhile, if one is there now - through a second, non-blocking open of the ticket pipe, so it
never waits for a ticket with answers in hand. A busy job's ranks all have a running thread:
taken one after another, each window left the worker's core idle (8 x 8-24 ms on 2 workers).
"""

from __future__ import annotations

import os
import signal
import struct
from collections import deque
from typing import Deque, Dict, List, Optional, Tuple

import msgspec

from diag.collect.priority import demote_self
from diag.collect.process_work import ProcessReader, ProcessResult, ProcessWork, WorkUnderWay

_HEADER = struct.Struct("<I")  # an answer's length
TICKET = struct.Struct("<II")  # (round, index in the round's job list)
_BOARD_HEADER = struct.Struct("<IQ")  # (round, length of the encoded job list)
# Tickets written per write: below PIPE_BUF (4096), so each write lands whole.
TICKETS_PER_WRITE = 4096 // TICKET.size
# Processes a worker holds with their native locations under way (each has a thread asleep in
# its perf window): past it, the worker waits for the oldest before taking a ticket.
MAX_UNDER_WAY = 8


class Round(msgspec.Struct, frozen=True):
    """A round's board: its jobs, and each CPU's scheduler-clock offset the Collector measured
    (``probes.sched_clock``: a worker does not move between CPUs to measure them itself)."""

    jobs: List[ProcessWork]
    cpu_offsets_ms: Dict[int, float] = {}


_jobs_codec = (msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(Round))
_result_codec = (msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(ProcessResult))


def write_frame(fd: int, payload: bytes) -> None:
    data = memoryview(_HEADER.pack(len(payload)) + payload)
    while data:
        data = data[os.write(fd, data) :]


def take_frames(buffer: bytes) -> Tuple[List[ProcessResult], bytes]:
    """The whole answers at the start of ``buffer``, and what is left of it."""
    results: List[ProcessResult] = []
    at = 0
    while len(buffer) - at >= _HEADER.size:
        (size,) = _HEADER.unpack_from(buffer, at)
        if len(buffer) - at - _HEADER.size < size:
            break
        start = at + _HEADER.size
        results.append(_result_codec[1].decode(buffer[start : start + size]))
        at = start + size
    return results, buffer[at:]


def post_board(
    board: int, round_no: int, jobs: List[ProcessWork], offsets: Optional[Dict[int, float]] = None
) -> None:
    """Write a round's job list where every worker can read it (before any of its tickets)."""
    payload = _jobs_codec[0].encode(Round(jobs, offsets or {}))
    data = memoryview(_BOARD_HEADER.pack(round_no, len(payload)) + payload)
    at = 0
    while at < len(data):
        at += os.pwrite(board, data[at:], at)


def read_board(board: int) -> Tuple[int, Round]:
    head = os.pread(board, _BOARD_HEADER.size, 0)
    round_no, size = _BOARD_HEADER.unpack(head)
    payload = b""
    while len(payload) < size:
        chunk = os.pread(board, size - len(payload), _BOARD_HEADER.size + len(payload))
        if not chunk:
            raise EOFError("the job board is shorter than it says")
        payload += chunk
    return round_no, _jobs_codec[1].decode(payload)


def post_tickets(tickets: int, round_no: int, count: int) -> int:
    """Post tickets 0..count-1 on the (non-blocking) ticket pipe; how many fit. The pipe is
    empty when a round starts and holds at least 4 KiB (512 tickets; 64 KiB usually): what
    does not fit is left to the Collector, which never blocks here on workers that hang."""
    for first in range(0, count, TICKETS_PER_WRITE):
        last = min(first + TICKETS_PER_WRITE, count)
        try:
            os.write(tickets, b"".join(TICKET.pack(round_no, i) for i in range(first, last)))
        except BlockingIOError:
            return first
    return count


def _read_exact(fd: int, size: int) -> Optional[bytes]:
    out = b""
    while len(out) < size:
        chunk = os.read(fd, size - len(out))
        if not chunk:
            return None
        out += chunk
    return out


def serve(reader: ProcessReader, tickets: int, board: int, answers: int) -> None:
    """The worker's loop: take a ticket, do that job of the board, answer; until the ticket
    pipe closes (the Collector closed the pool, or diag died)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    # A real-time burst's bound ran out (``collect.priority``, RLIMIT_RTTIME): back to normal.
    signal.signal(signal.SIGXCPU, demote_self)
    keep = sorted({0, 1, 2, tickets, board, answers})
    for low, high in zip(keep, [*keep[1:], os.sysconf("SC_OPEN_MAX")]):
        os.closerange(low + 1, high)
    encode = _result_codec[0].encode
    reader.clock.moves = False  # a real-time worker moved onto a busy CPU waits there
    quick = _reopen_nonblocking(tickets)
    round_no = -1
    jobs: List[ProcessWork] = []
    under_way: Deque[WorkUnderWay] = deque()
    while True:
        for done in [w for w in under_way if w.ready()]:
            under_way.remove(done)
            write_frame(answers, encode(done.finish()))
        if under_way and (quick is None or len(under_way) >= MAX_UNDER_WAY):
            write_frame(answers, encode(under_way.popleft().finish()))
            continue
        ticket = _take_ticket(quick, tickets) if under_way else _read_exact(tickets, TICKET.size)
        if ticket is None:
            if not under_way:
                return
            # No ticket now: wait for the oldest (a closed pipe is seen once all are answered).
            write_frame(answers, encode(under_way.popleft().finish()))
            continue
        wanted, index = TICKET.unpack(ticket)
        if wanted != round_no:
            round_no, posted = read_board(board)
            jobs = posted.jobs
            reader.clock.adopt(posted.cpu_offsets_ms)
            if round_no != wanted:  # cannot happen while the Collector keeps its order
                raise RuntimeError(f"ticket for round {wanted}, board has {round_no}")
        job = jobs[index]
        if job.task == "identity":
            write_frame(answers, encode(reader.identify(job)))
        else:
            under_way.append(reader.begin(job))


def _reopen_nonblocking(fd: int) -> Optional[int]:
    """A second open of the ticket pipe's read end, non-blocking (its own file description:
    the shared one stays blocking for every worker); None where /proc cannot give one."""
    try:
        return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None


def _take_ticket(quick: Optional[int], tickets: int) -> Optional[bytes]:
    """The next ticket if one is in the pipe now; None if not (or the pipe is closed)."""
    if quick is None:
        return None
    try:
        got = os.read(quick, TICKET.size)
    except OSError:  # BlockingIOError: none now
        return None
    if not got or len(got) == TICKET.size:
        return got or None
    rest = _read_exact(tickets, TICKET.size - len(got))  # never: tickets are read whole
    return None if rest is None else got + rest
