"""gRPC for Python (grpcio): RPC servers and clients of a job - data feeders, parameter and
inference services, Ray's own control plane.

Its streams have HTTP/2 flow control: a server-streaming handler's ``yield`` returns only once
the message is handed to the transport, which it is not while the client's receive window is
full. A client that stops reading (blocked elsewhere) parks the server's handler thread in
``_send_response`` on an untimed ``Condition.wait`` - a wait its client ends by reading, never
an idle server. A client streaming requests to a server that stops reading waits the same way
in ``consume_request_iterator``. Both are ``flow_pauses`` (``diag.verdict.flow_control``).
"""

from __future__ import annotations

from diag.frameworks.base import FlowPause, Pack

PACK = Pack(
    name="gRPC (grpcio)",
    key="grpc",
    modules=("grpc/_server.py", "grpc/_channel.py", "grpc/_cython/", "grpc/aio/"),
    env=("GRPC_",),
    # Its C-core threads (/proc/TID/comm: "grpc_global_tim", "event_engine", "lifeguard") are
    # no collective backend's: not ``backend_threads``, which the union reads as such.
    # The server's completion-queue loop, its main thread's wait_for_termination, and the
    # client channel's spin thread: each parked while nothing is asked.
    idle_frames=frozenset({"_serve", "wait_for_termination", "channel_spin"}),
    flow_pauses=(
        FlowPause(
            party="peer reader",
            what="gRPC's stream writer waits for its client to read (HTTP/2 flow control: "
            "the client's receive window is full)",
            frames=frozenset({"_send_response"}),
            files=("grpc/_server.py",),
            remedy="find why the client stopped reading its stream (py-spy dump it); the "
            "server resumes as soon as it reads",
        ),
        FlowPause(
            party="peer reader",
            what="gRPC's request stream writer waits for its server to read (HTTP/2 flow "
            "control: the server's receive window is full)",
            frames=frozenset({"consume_request_iterator"}),
            files=("grpc/_channel.py",),
            # It parks in _common.wait(state.condition.wait, ...); a thread in the user's own
            # request generator (next(request_iterator)) waits on its producer instead.
            via=("/threading.py", "grpc/_common.py"),
            remedy="find why the server stopped reading the request stream (py-spy dump "
            "it); the client resumes as soon as it reads",
        ),
    ),
    sources=(
        "grpcio 1.85.1 grpc/_server.py: _send_response (l. 708-745: start_server_batch, then "
        "an untimed state.condition.wait() until the send completes), called per message by "
        "_stream_response_in_pool / _send_message_callback_to_blocking_iterator_adapter",
        "grpcio 1.85.1 grpc/_server.py: _serve (the completion-queue loop), "
        "_Server.wait_for_termination (_common.wait on termination_event)",
        "grpcio 1.85.1 grpc/_channel.py: _consume_request_iterator.<locals>."
        "consume_request_iterator (_common.wait(state.condition.wait, ...) per request), "
        "_run_channel_spin_thread.<locals>.channel_spin",
        "grpc/grpc src/core/lib/iomgr/timer_manager.cc: the 'grpc_global_timer' thread; "
        "thread names measured in a real capture (tests/test_grpc_real.py)",
    ),
)
