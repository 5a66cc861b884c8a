"""The wire between the Collector and its workers (``diag.collect.shard_wire``)."""

from __future__ import annotations

import fcntl
import os

from diag.collect.process_work import ProcessResult, ProcessWork
from diag.collect.shard_wire import (
    TICKET,
    Round,
    _reopen_nonblocking,
    _result_codec,
    _take_ticket,
    post_board,
    post_tickets,
    read_board,
    take_frames,
    write_frame,
)


def test_tickets_never_block_and_say_how_many_fit() -> None:
    """A pipe may be one page (a user over pipe-user-pages-soft): the round's tickets that do
    not fit are reported, not waited for - a hung worker must not hang the Collector."""
    read, write = os.pipe()
    try:
        fcntl.fcntl(write, getattr(fcntl, "F_SETPIPE_SZ", 1031), 4096)  # 1031: Linux's
        os.set_blocking(write, False)
        assert post_tickets(write, 7, 1000) == 4096 // TICKET.size
        data = os.read(read, 65536)
        tickets = [TICKET.unpack_from(data, at) for at in range(0, len(data), TICKET.size)]
        assert tickets == [(7, i) for i in range(4096 // TICKET.size)]
        assert post_tickets(write, 8, 3) == 3  # emptied: a round fits again
    finally:
        os.close(read)
        os.close(write)


def test_board_holds_the_latest_round() -> None:
    board = os.memfd_create("test-board")
    try:
        long_round = [ProcessWork(pid=p, identity=True) for p in range(300)]
        post_board(board, 1, long_round, {0: -20864.1, 1: -21901.6})
        assert read_board(board) == (1, Round(long_round, {0: -20864.1, 1: -21901.6}))
        short_round = [ProcessWork(pid=42)]
        post_board(board, 2, short_round)  # shorter than what was there: the header says
        assert read_board(board) == (2, Round(short_round))
    finally:
        os.close(board)


def test_answers_are_taken_whole_from_any_split() -> None:
    read, write = os.pipe()
    try:
        answers = [ProcessResult(pid=p, proc_s=p / 10) for p in range(3)]
        for answer in answers:
            write_frame(write, _result_codec[0].encode(answer))
        data = os.read(read, 65536)
    finally:
        os.close(read)
        os.close(write)
    taken, rest = take_frames(data[:-3])
    assert taken == answers[:2] and rest == data[len(data) - len(rest) - 3 : -3]
    more, left = take_frames(rest + data[-3:])
    assert more == answers[2:] and left == b""


def test_a_worker_with_answers_under_way_takes_a_ticket_only_if_one_is_there() -> None:
    """A worker holding processes whose native locations are still sampled takes the next
    ticket through its own non-blocking open of the pipe: with none there it must not wait
    (the answers it holds are what the Collector waits for), and the shared end stays
    blocking for the other workers."""
    read, write = os.pipe()
    quick = _reopen_nonblocking(read)
    assert quick is not None
    try:
        assert _take_ticket(quick, read) is None  # empty: no wait
        assert os.get_blocking(read)
        post_tickets(write, 3, 2)
        assert _take_ticket(quick, read) == TICKET.pack(3, 0)
        assert os.read(read, TICKET.size) == TICKET.pack(3, 1)  # the other end: the next one
        os.close(write)
        write = -1
        assert _take_ticket(quick, read) is None  # closed: the blocking read sees the end
        assert _take_ticket(None, read) is None  # no second open: never a ticket here
    finally:
        for fd in (read, write, quick):
            if fd >= 0:
                os.close(fd)
