"""A byte-level HTTP/1.1 server on loopback, for replies no server library would send: the test
gives it a function from each request to the exact bytes that go back.

Every request it reads whole (headers and Content-Length body) is kept in `requests`, in the order
received, so a test judges vlmload by what the server saw, not by vlmload's word.
"""
import json
import socket
import struct
import threading
import time


class Request:
    def __init__(self, method, path, headers, body, conn_id, index_on_conn):
        self.method = method
        self.path = path
        self.headers = headers  # lower-case names
        self.body = body
        self.conn_id = conn_id  # which connection carried it (0, 1, ... in accept order)
        self.index_on_conn = index_on_conn  # 0 for the first request on its connection

    def json(self):
        return json.loads(self.body.decode())


def _pending(conn):
    """Whether bytes wait unread on conn (without reading them)."""
    conn.setblocking(False)
    try:
        return bool(conn.recv(1, socket.MSG_PEEK))
    except OSError:
        return False
    finally:
        conn.setblocking(True)


def response(status=200, body=b"", headers=None, reason=None, close=False):
    """The bytes of one whole response with a Content-Length."""
    if isinstance(body, str):
        body = body.encode()
    lines = ["HTTP/1.1 %d %s" % (status, reason or "X")]
    hdrs = {"Content-Type": "application/json", "Content-Length": str(len(body))}
    hdrs.update(headers or {})
    if close:
        hdrs["Connection"] = "close"
    lines += ["%s: %s" % kv for kv in hdrs.items() if kv[1] is not None]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def chunked(status=200, chunks=(), headers=None, end=True):
    """A chunked response: each item of chunks is sent as one chunk; end adds the last chunk."""
    hdrs = {"Content-Type": "text/event-stream", "Transfer-Encoding": "chunked"}
    hdrs.update(headers or {})
    out = ("HTTP/1.1 %d X\r\n" % status + "".join("%s: %s\r\n" % kv for kv in hdrs.items()) +
           "\r\n").encode()
    for c in chunks:
        if isinstance(c, str):
            c = c.encode()
        if c:
            out += b"%x\r\n" % len(c) + c + b"\r\n"
    if end:
        out += b"0\r\n\r\n"
    return out


def chat_reply(content="hello", prompt_tokens=10, completion_tokens=2):
    return json.dumps({
        "id": "x", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens}})


class RawServer:
    """Serves on 127.0.0.1 at an ephemeral port until stop().

    handler(req) returns what to do with one request: bytes to write, or a list whose items are
    bytes (written in turn), a number (seconds to sleep), "close" (close the connection) or
    "abort" (reset it: an RST, not a FIN). The connection is kept alive after the reply unless
    the list closes it.

    idle_close: after a reply, a connection that brings no new request within this many seconds
    is sent idle_bytes (say, a 408) and closed, as nginx and uvicorn do; a request that had begun
    to arrive as it timed out is counted in `dropped`.

    close_after: after each reply the connection is closed, without a `Connection: close` that
    would have told the client: after this many seconds (0: at once), or "next": as the next
    request begins to arrive. close_bytes (say, a 408) are sent first. The server reads nothing
    more before it closes: a request that had begun to arrive is dropped unread, and counted in
    `dropped`. The close is abrupt (bytes left unread make the kernel reset the connection, and
    the client's sends fail), unless close_linger: then the client's bytes are drained, unparsed,
    until it closes its end, so that it surely reads close_bytes.

    rcvbuf: the receive buffer of every connection, in bytes (the kernel's own sizing when None):
    a small one keeps a client from writing a large request whole before the server reads it.
    """

    def __init__(self, handler, idle_close=None, idle_bytes=b"", close_after=None,
                 close_bytes=b"", close_linger=False, rcvbuf=None):
        self.handler = handler
        self.idle_close = idle_close
        self.idle_bytes = idle_bytes
        self.close_after = close_after
        self.close_bytes = close_bytes
        self.close_linger = close_linger
        self.requests = []
        self.connections = 0
        self.idle_closes = 0
        self.dropped = 0  # requests that had begun to arrive when the server closed, never read
        self.lock = threading.Lock()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if rcvbuf:  # before listen(): accepted connections inherit it, window scale included
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)
        self.port = self.sock.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.stopping = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        self.stopping = True
        try:
            self.sock.close()
        except OSError:
            pass

    def chat_requests(self):
        with self.lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def _accept(self):
        while not self.stopping:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                cid = self.connections
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn, cid), daemon=True).start()

    def _read_request(self, conn, buf, first):
        """Reads one request: (request tuple, rest of buf); (None, buf) at EOF; ("idle", buf)
        when an idle connection timed out."""
        while b"\r\n\r\n" not in buf:
            conn.settimeout(None if first or self.idle_close is None else self.idle_close)
            try:
                data = conn.recv(65536)
            except socket.timeout:
                return "idle", buf
            except OSError:
                return None, buf
            if not data:
                return None, buf
            buf += data
            first = True  # a request has begun: wait for the rest of it
        head, buf = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {}
        for l in lines[1:]:
            k, _, v = l.partition(":")
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length", "0"))
        conn.settimeout(10)
        parts, have = [buf], len(buf)
        while have < n:
            data = conn.recv(1 << 20)
            if not data:
                return None, b"".join(parts)
            parts.append(data)
            have += len(data)
        buf = b"".join(parts)
        return (method, path, headers, buf[:n]), buf[n:]

    def _close_unasked(self, conn, buf):
        """Closes a connection after a reply, as close_after says."""
        if self.close_after == "next":
            conn.settimeout(10)
            try:
                begun = bool(buf or conn.recv(1, socket.MSG_PEEK))
            except OSError:
                begun = False
            if not begun:
                return  # the client closed it, or brought nothing
        else:
            time.sleep(self.close_after)
            begun = bool(buf or _pending(conn))
        with self.lock:
            self.dropped += begun
        conn.sendall(self.close_bytes)
        if self.close_linger:
            conn.shutdown(socket.SHUT_WR)
            conn.settimeout(2)
            while conn.recv(65536):
                pass

    def _serve(self, conn, cid):
        buf = b""
        index = 0
        aborted = False
        try:
            while not self.stopping:
                got, buf = self._read_request(conn, buf, index == 0)
                if got == "idle":
                    begun = bool(buf or _pending(conn))
                    with self.lock:
                        self.idle_closes += 1
                        self.dropped += begun
                    conn.sendall(self.idle_bytes)
                    return
                if got is None:
                    return
                req = Request(*got, cid, index)
                index += 1
                with self.lock:
                    self.requests.append(req)
                actions = self.handler(req)
                if isinstance(actions, (bytes, str)):
                    actions = [actions]
                for a in actions:
                    if a == "close":
                        return
                    if a == "abort":
                        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                        struct.pack("ii", 1, 0))
                        aborted = True
                        return
                    if isinstance(a, (int, float)):
                        time.sleep(a)
                    else:
                        conn.sendall(a.encode() if isinstance(a, str) else a)
                if self.close_after is not None:
                    self._close_unasked(conn, buf)
                    return
        except OSError:
            pass
        finally:
            try:
                if not aborted:
                    conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()
