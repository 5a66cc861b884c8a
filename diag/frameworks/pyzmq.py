"""pyzmq: ZeroMQ sockets, which vLLM and SGLang pass requests and results through.

Facts from pyzmq 25-26 (zmq/sugar/socket.py, zmq/sugar/poll.py, zmq/error.py).
"""

from __future__ import annotations

from diag.frameworks.base import FlowPause, Pack

PACK = Pack(
    name="pyzmq (ZeroMQ)",
    key="pyzmq",
    modules=("zmq/",),
    # pyzmq builds the ``Again`` it raises in Python (``ZMQError.__init__``): a NOBLOCK
    # receive on an empty socket shows there.
    nonblocking_files=("zmq/error.py",),
    # A receive or poll call caught running: it returned at once, nothing to receive.
    poll_files=("zmq/sugar/socket.py", "zmq/sugar/poll.py"),
    backend_threads=(),
    plumbing_packages=frozenset({"zmq"}),
    # A blocking send on a PUSH/DEALER/REQ socket at its high-water mark (SNDHWM, 1000
    # messages by default) waits, in libzmq's poll on the socket's mailbox, for the peer to
    # read: the innermost Python frame is Socket.send (send_multipart/_pyobj/_json call it).
    flow_pauses=(
        FlowPause(
            party="peer reader",
            what="a ZeroMQ socket's blocking send waits for its peer to read (the socket's "
            "high-water mark is reached)",
            frames=frozenset({"send"}),
            files=("zmq/sugar/socket.py",),
            remedy="find why the receiving process stopped reading (py-spy dump it); the "
            "sender resumes as soon as it reads - a larger SNDHWM only delays the stall",
        ),
    ),
    sources=(
        "pyzmq 26 zmq/sugar/socket.py, zmq/error.py",
        "pyzmq 27.3.0 zmq/sugar/socket.py: Socket.send (l. 713: super().send, a blocking "
        "zmq_send in libzmq; zmq_setsockopt(3) ZMQ_SNDHWM: PUSH blocks at the mark)",
    ),
)
