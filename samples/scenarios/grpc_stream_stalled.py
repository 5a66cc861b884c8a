"""slow (stalled by flow control): a trainer streams samples from its data server over a gRPC
server-streaming RPC, reads three messages and then stops reading (it sleeps in its own code,
blocked elsewhere). The server's handler keeps writing until HTTP/2 flow control fills the
client's window; then its stream writer waits in grpc's ``_send_response`` for the client to
read - a wait with a party (the client, pid in READY) that can end it, not an idle server.

``--reading``: the contrast - the client reads steadily (the stream is progressing).
``--upload``: the other direction - the trainer streams checkpoint chunks to the server
(stream-unary), whose handler reads three and then sleeps in its own code: the client's
request-stream writer waits in grpc's ``consume_request_iterator`` for the server to read."""

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

    def upload(requests, context: grpc.ServicerContext) -> bytes:  # type: ignore[no-untyped-def]
        for i, _chunk in enumerate(requests):
            if i == 3:
                time.sleep(10**6)  # blocked elsewhere: the request stream is never read again
        return b"done"

    handler = grpc.method_handlers_generic_handler(
        "diag.Feed",
        {
            "Stream": grpc.unary_stream_rpc_method_handler(stream),
            "Upload": grpc.stream_unary_rpc_method_handler(upload),
        },
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


def upload(port: int, server_pid: int) -> None:
    """Stream 256 KiB chunks to the server for ever; READY once the stream is stalled."""
    import threading

    sent = [0]

    def chunks():  # type: ignore[no-untyped-def]
        while True:
            sent[0] += 1
            yield b"y" * CHUNK_BYTES

    def ready() -> None:
        last = -1
        while sent[0] != last:  # no chunk taken for half a second: flow control holds it
            last = sent[0]
            time.sleep(0.5)
        print("READY", server_pid, flush=True)

    threading.Thread(target=ready, daemon=True).start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    channel.stream_unary("/diag.Feed/Upload")(chunks())


def main() -> None:
    if sys.argv[1:2] == ["serve"]:
        serve()
        return
    server = subprocess.Popen([sys.executable, __file__, "serve"], stdout=subprocess.PIPE)
    assert server.stdout is not None
    port = int(server.stdout.readline())
    if "--upload" in sys.argv:
        upload(port, server.pid)
    else:
        train(port, "--reading" in sys.argv, server.pid)


if __name__ == "__main__":
    main()
