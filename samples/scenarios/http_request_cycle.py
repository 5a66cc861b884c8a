"""deadlocked: two single-threaded HTTP services of one job call each other. The "api" (the
root process) handles /generate by calling the "tokenizer" service (a child); the tokenizer's
handler first fetches /config from the api - whose only thread is busy in /generate. A client
process of the job sent /generate. api -> tokenizer -> api: a cycle of requests no timeout
ends. By its stacks each service sits in a socket read behind a listening port - the picture
of two healthy servers waiting for work."""

from __future__ import annotations

import multiprocessing as mp
import socket
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


API, TOK = free_port(), free_port()


class Api(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/config":
            body = b'{"vocab": 32000}'
        else:  # /generate: tokenize first
            body = urllib.request.urlopen(f"http://127.0.0.1:{TOK}/encode?q=hi").read()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class Tok(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        print("READY", flush=True)  # the callback below waits behind /generate from here on
        config = urllib.request.urlopen(f"http://127.0.0.1:{API}/config").read()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(config)

    def log_message(self, *args: object) -> None:
        pass


def tokenizer() -> None:
    HTTPServer(("127.0.0.1", TOK), Tok).serve_forever()


def client() -> None:
    time.sleep(1)
    urllib.request.urlopen(f"http://127.0.0.1:{API}/generate").read()


if __name__ == "__main__":
    mp.set_start_method("fork")
    server = HTTPServer(("127.0.0.1", API), Api)  # listening before anyone calls it
    mp.Process(target=tokenizer, name="tokenizer").start()
    mp.Process(target=client, name="client").start()
    server.serve_forever()
