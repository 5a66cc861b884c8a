"""pyzmq: ZeroMQ sockets, which vLLM and SGLang pass requests and results through.

Facts from pyzmq 25-26 (zmq/sugar/socket.py, zmq/sugar/poll.py, zmq/error.py).
"""

from __future__ import annotations

from diag.frameworks.base import Pack

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
    sources=("pyzmq 26 zmq/sugar/socket.py, zmq/error.py",),
)
