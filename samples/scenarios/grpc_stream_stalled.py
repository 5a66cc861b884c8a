"""slow (stalled by flow control): a trainer streams samples from its data server over a gRPC
server-streaming RPC, reads three messages and then stops reading (it sleeps in its own code,
blocked elsewhere). The server's handler keeps writing until HTTP/2 flow control fills the
client's window; then its stream writer waits in grpc's ``_send_response`` for the client to
read - a wait with a party (the client, pid in READY) that can end it, not an idle server.

``--reading``: the contrast - the client reads steadily (the stream is progressing)."""

from __future__ import annotations

import subprocess
import sys
import time

import grpc

METHOD = "/diag.Feed/Stream"
CHUNK_BYTES = 256 * 1024


def serve() -> None:
    """The data server: one server-streaming method that yields 256 KiB chunks forever."""
    from concurrent import futures

    def stream(request: bytes, context: grpc.ServicerContext):  # type: ignore[no-untyped-def]
        n = 0
        while True:
            n += 1
            yield n.to_bytes(8, "little") + b"x" * CHUNK_BYTES

    handler = grpc.method_handlers_generic_handler(
        "diag.Feed", {"Stream": grpc.unary_stream_rpc_method_handler(stream)}
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    server.wait_for_termination()


def train(port: int, reading: bool, server_pid: int) -> None:
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    call = channel.unary_stream(METHOD)(b"go")
    for i, _chunk in enumerate(call):
        if i == 3 and not reading:
            print("READY", server_pid, flush=True)
            time.sleep(10**6)  # blocked elsewhere: the stream is never read again
        if i == 3:
            print("READY", server_pid, flush=True)
        if reading:
            time.sleep(0.02)  # a steady consumer: ~50 chunks (12 MiB) a second


def main() -> None:
    if sys.argv[1:2] == ["serve"]:
        serve()
        return
    server = subprocess.Popen([sys.executable, __file__, "serve"], stdout=subprocess.PIPE)
    assert server.stdout is not None
    port = int(server.stdout.readline())
    train(port, "--reading" in sys.argv, server.pid)


if __name__ == "__main__":
    main()
