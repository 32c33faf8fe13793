#!/usr/bin/env python3
"""Serves Prometheus pages to the monitor's tests, on 127.0.0.1 and a port the system picks.

Usage: prom_server.py FILE [RECORD]. Prints the port on its first line. GET /metrics answers FILE
as it is at that moment; /auth answers a metric whose labels echo the Authorization and X-Extra
headers; /big answers 9 MiB; /slow answers after 3 s; /status/NNN answers status NNN; /llamacpp
answers what llama.cpp's llama-server started without --metrics answers on /metrics (501 and its
JSON error). With RECORD, each answer appends a line "PATH STATUS" to that file once it is sent.
Exits when its standard input closes (the test is over) or after two minutes, whichever comes
first.
"""
import http.server
import os
import sys
import threading
import time

RECORD_LOCK = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, code, body, ctype="text/plain; version=0.0.4; charset=utf-8"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        if len(sys.argv) > 2:
            with RECORD_LOCK, open(sys.argv[2], "a") as f:
                f.write("%s %d\n" % (self.path, code))

    def do_GET(self):
        path = self.path
        if path.startswith("/metrics"):
            with open(sys.argv[1], "rb") as f:
                self.answer(200, f.read())
        elif path == "/auth":
            auth = self.headers.get("Authorization", "none")
            extra = self.headers.get("X-Extra", "none")
            self.answer(200, f'auth_seen{{value="{auth}",extra="{extra}"}} 1\n'.encode())
        elif path == "/big":
            self.answer(200, b"#" * (9 << 20))
        elif path == "/slow":
            time.sleep(3)
            self.answer(200, b"slow 1\n")
        elif path.startswith("/status/"):
            self.answer(int(path[len("/status/"):]), b"no\n")
        elif path == "/llamacpp":
            # llama.cpp's tools/server: res_error() of format_error_response(...,
            # ERROR_TYPE_NOT_SUPPORTED) when params.endpoint_metrics is off.
            self.answer(501, b'{"error":{"code":501,"message":"This server does not support '
                             b'metrics endpoint. Start it with `--metrics`","type":'
                             b'"not_supported_error"}}', "application/json; charset=utf-8")
        else:
            self.answer(404, b"not found\n")


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client that hangs up early (a timeout, a capped answer) is expected


def main():
    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    limit = threading.Timer(120, lambda: os._exit(1))
    limit.daemon = True
    limit.start()
    try:
        sys.stdout.write("%d\n" % server.server_address[1])
        sys.stdout.flush()
        sys.stdin.read()
    finally:
        os._exit(0)


if __name__ == "__main__":
    main()
