"""A small HTTP/1.0 server for GET /metrics that no client can exhaust.

socketserver's ThreadingMixIn gave each connection a thread and no read timeout: 1,100
idle connections from any local user used up the 1,024 descriptors of the systemd unit
and cut the node off from Prometheus.  Here one thread (the selector) accepts, reads the
request heads and writes the replies, all non-blocking; a small pool of workers only
renders (the WSGI app); and every connection is bounded:

- at most `max_connections` open at once (at most MAX_CONNECTIONS, and never so many that
  the collectors' own files could lack descriptors: RESERVED_FDS stay free under the
  soft RLIMIT_NOFILE, which start() raises towards its hard limit, up to WANT_NOFILE);
  past it the oldest connection that has not yet sent its request is closed at once,
  so a flood of idle connections makes room for a scraper's, which asks at once;
- a request head must arrive whole within READ_DEADLINE_S and MAX_HEAD_BYTES (else
  408 or 431, and closed); a reply must be taken within WRITE_DEADLINE_S (else closed);
- one request per connection (HTTP/1.0, `Connection: close`), as wsgiref's server did.

An idle connection costs one descriptor and a few hundred bytes, no thread.
"""

from __future__ import annotations

import concurrent.futures
import errno
import queue
import resource
import selectors
import socket
import threading
import time

MAX_CONNECTIONS = 256
RESERVED_FDS = 640          # the collectors' FileCache (512 files) and the rest of us
MIN_CONNECTIONS = 8
WANT_NOFILE = 4096          # the soft limit start() asks for (never above the hard one)
MAX_HEAD_BYTES = 8192
READ_DEADLINE_S = 10.0
WRITE_DEADLINE_S = 10.0
LINGER_S = 2.0              # after a reply, for the client to close its side
WORKERS = 2
ACCEPT_BATCH = 64           # accepted per turn of the loop, so heads already in are read


def raise_nofile(want: int = WANT_NOFILE) -> int:
    """Raise the soft RLIMIT_NOFILE towards `want` (never above the hard limit, never
    lowered).  Returns the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError):
            pass
    return soft


def connection_cap(soft_nofile: int) -> int:
    """How many connections may be open at once under this descriptor limit."""
    if soft_nofile == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(MIN_CONNECTIONS, min(MAX_CONNECTIONS, soft_nofile - RESERVED_FDS))


_REASONS = {200: "OK", 400: "Bad Request", 405: "Method Not Allowed", 404: "Not Found",
            408: "Request Timeout", 431: "Request Header Fields Too Large",
            500: "Internal Server Error", 503: "Service Unavailable"}


def _reply(status: str, headers: list[tuple[str, str]], body: bytes, head_only: bool) -> bytes:
    names = {k.lower() for k, _ in headers}
    lines = [f"HTTP/1.0 {status}", "Server: gpudisk-top"]
    lines += [f"{k}: {v}" for k, v in headers]
    if "content-length" not in names:
        lines.append(f"Content-Length: {len(body)}")
    lines.append("Connection: close")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if head_only else head + body


def _error(code: int) -> bytes:
    body = f"{_REASONS[code].lower()}\n".encode()
    return _reply(f"{code} {_REASONS[code]}", [("Content-Type", "text/plain; charset=utf-8")],
                  body, False)


class _Conn:
    __slots__ = ("sock", "head", "out", "sent", "deadline", "state")

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.head = bytearray()
        self.out = b""
        self.sent = 0
        self.deadline = deadline
        # "read" | "busy" (a worker renders) | "write" | "drain" (replied, half-closed)
        self.state = "read"


class BoundedHTTPServer:
    """Serves the WSGI `app` (the few environ keys a GET needs) on host:port.  The
    methods socketserver's servers have, for MetricsServer: serve_forever(), shutdown(),
    server_close(), server_address.  Raises OSError from bind/listen."""

    def __init__(self, host: str, port: int, family: int, app, *,
                 max_connections: int | None = None, workers: int = WORKERS,
                 read_deadline_s: float = READ_DEADLINE_S,
                 write_deadline_s: float = WRITE_DEADLINE_S,
                 max_head_bytes: int = MAX_HEAD_BYTES) -> None:
        self.app = app
        self.max_connections = (max_connections if max_connections is not None
                                else connection_cap(resource.getrlimit(resource.RLIMIT_NOFILE)[0]))
        self.read_deadline_s = read_deadline_s
        self.write_deadline_s = write_deadline_s
        self.max_head_bytes = max_head_bytes
        self.closed_early = 0        # connections closed to make room, or past a deadline
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._sock.bind((host, port))
            self._sock.listen(128)
            self._sock.setblocking(False)
        except OSError:
            self._sock.close()
            raise
        self.server_address = self._sock.getsockname()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max(1, workers), thread_name_prefix="gpudisk-top metrics render")
        self._done: queue.SimpleQueue = queue.SimpleQueue()
        self._conns: dict[int, _Conn] = {}        # by fd, oldest first
        self._sel = selectors.DefaultSelector()
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._accept_paused_until = 0.0

    # ------------------------------------------------------------------ the loop
    def serve_forever(self, poll_interval: float | None = None) -> None:
        """Serve until shutdown().  The loop sleeps until a client, a rendered reply or
        shutdown() wakes it (its wake socket), or a connection's deadline or a paused
        accept comes due: an exporter nobody scrapes costs no wake-ups.  poll_interval:
        wake at least this often too (socketserver's parameter; None: never for nothing)."""
        sel = self._sel
        sel.register(self._sock, selectors.EVENT_READ, "listen")
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        listening = True
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if not listening and now >= self._accept_paused_until:
                    sel.register(self._sock, selectors.EVENT_READ, "listen")
                    listening = True
                due = [] if poll_interval is None else [poll_interval]
                if not listening:
                    due.append(max(0.0, self._accept_paused_until - now))
                due += [max(0.0, conn.deadline - now) for conn in self._conns.values()
                        if conn.state != "busy"]
                timeout = min(due) if due else None
                for key, events in sel.select(timeout):
                    if key.data == "listen":
                        if not self._accept():
                            sel.unregister(self._sock)
                            listening = False
                    elif key.data == "wake":
                        try:
                            while self._wake_r.recv(4096):
                                pass
                        except BlockingIOError:
                            pass
                    else:
                        conn = self._conns.get(key.fd)
                        if conn is None:
                            continue
                        if conn.state == "read" and events & selectors.EVENT_READ:
                            self._read(conn)
                        elif conn.state == "drain":
                            self._drain(conn)
                        elif conn.state == "write" and events & selectors.EVENT_WRITE:
                            self._write(conn)
                self._take_replies()
                self._expire(time.monotonic())
        finally:
            self._stopped.set()

    def _accept(self) -> bool:
        """Accept what waits (up to ACCEPT_BATCH).  False: out of descriptors with nothing
        to close; stop listening for a moment."""
        for _ in range(ACCEPT_BATCH):
            try:
                sock, _addr = self._sock.accept()
            except BlockingIOError:
                return True
            except OSError as err:
                if err.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    if self._evict_oldest_reader():
                        continue
                    self._accept_paused_until = time.monotonic() + 0.1
                    return False
                return True          # ECONNABORTED and the like: that client's problem
            if len(self._conns) >= self.max_connections and not self._evict_oldest_reader():
                sock.close()          # every slot renders or replies: no room now
                self.closed_early += 1
                continue
            sock.setblocking(False)
            conn = _Conn(sock, time.monotonic() + self.read_deadline_s)
            self._conns[sock.fileno()] = conn
            self._sel.register(sock, selectors.EVENT_READ, "conn")
        return True

    def _evict_oldest_reader(self) -> bool:
        """Close one connection to make room: one already answered, else the oldest that
        has not sent its request whole.  False when every one renders or replies."""
        for state in ("drain", "read"):
            for fd, conn in self._conns.items():
                if conn.state == state:
                    self._close(fd)
                    self.closed_early += state == "read"
                    return True
        return False

    def _read(self, conn: _Conn) -> None:
        fd = conn.sock.fileno()
        try:
            data = conn.sock.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            self._close(fd)
            return
        if not data:
            self._close(fd)
            return
        conn.head += data
        end = conn.head.find(b"\r\n\r\n")
        if end < 0:
            end = conn.head.find(b"\n\n")
        if end < 0:
            if len(conn.head) > self.max_head_bytes:
                self._start_reply(conn, _error(431))
            return
        if end > self.max_head_bytes:
            self._start_reply(conn, _error(431))
            return
        line = bytes(conn.head[:conn.head.find(b"\n")]).strip()
        parts = line.split()
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
            self._start_reply(conn, _error(400))
            return
        method = parts[0].decode("latin-1")
        target = parts[1].decode("latin-1")
        path, _, query = target.partition("?")
        conn.state = "busy"
        self._sel.unregister(conn.sock)
        future = self._pool.submit(self._render, method, path, query)
        future.add_done_callback(lambda f, fd=fd, conn=conn: self._rendered(fd, conn, f))

    def _render(self, method: str, path: str, query: str) -> bytes:
        environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query,
                   "SERVER_PROTOCOL": "HTTP/1.0"}
        got: list = []

        def start_response(status, headers, exc_info=None):
            got[:] = [status, list(headers)]

        try:
            body = b"".join(self.app(environ, start_response))
        except Exception:  # noqa: BLE001 - a failed render is the client's 500, the server lives
            return _error(500)
        if not got:
            return _error(500)
        return _reply(got[0], got[1], body, method == "HEAD")

    def _rendered(self, fd: int, conn: _Conn, future) -> None:
        try:
            data = future.result()
        except BaseException:  # noqa: BLE001 - cancelled at close
            data = _error(503)
        self._done.put((fd, conn, data))
        try:
            self._wake_w.send(b"\0")
        except OSError:
            pass

    def _take_replies(self) -> None:
        while True:
            try:
                fd, conn, data = self._done.get_nowait()
            except queue.Empty:
                return
            if self._conns.get(fd) is not conn:
                continue
            conn.state = "read"          # _start_reply registers it for writing
            self._start_reply(conn, data, registered=False)

    def _start_reply(self, conn: _Conn, data: bytes, registered: bool = True) -> None:
        conn.out, conn.sent, conn.state = data, 0, "write"
        conn.deadline = time.monotonic() + self.write_deadline_s
        if registered:
            self._sel.modify(conn.sock, selectors.EVENT_WRITE, "conn")
        else:
            self._sel.register(conn.sock, selectors.EVENT_WRITE, "conn")
        self._write(conn)

    def _write(self, conn: _Conn) -> None:
        fd = conn.sock.fileno()
        try:
            while conn.sent < len(conn.out):
                n = conn.sock.send(memoryview(conn.out)[conn.sent:conn.sent + 65536])
                if n <= 0:
                    return
                conn.sent += n
        except BlockingIOError:
            return
        except OSError:
            self._close(fd)
            return
        # the reply is out: half-close, and read (and drop) what the client still sends
        # until it closes, a moment at most: closing with unread input would send a
        # reset, which can destroy the reply before the client has read it
        try:
            conn.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self._close(fd)
            return
        conn.state = "drain"
        conn.deadline = time.monotonic() + LINGER_S
        self._sel.modify(conn.sock, selectors.EVENT_READ, "conn")

    def _drain(self, conn: _Conn) -> None:
        try:
            if conn.sock.recv(65536):
                return
        except BlockingIOError:
            return
        except OSError:
            pass
        self._close(conn.sock.fileno())

    def _expire(self, now: float) -> None:
        late = [fd for fd, c in self._conns.items() if c.state != "busy" and c.deadline <= now]
        for fd in late:
            conn = self._conns[fd]
            if conn.state == "read" and conn.head:
                # a head that has not arrived whole in time: say so, once, if it fits
                try:
                    conn.sock.send(_error(408))
                except OSError:
                    pass
            if conn.state != "drain":
                self.closed_early += 1
            self._close(fd)

    def _close(self, fd: int) -> None:
        conn = self._conns.pop(fd, None)
        if conn is None:
            return
        if conn.state != "busy":
            try:
                self._sel.unregister(conn.sock)
            except (KeyError, ValueError):
                pass
        conn.sock.close()

    # ------------------------------------------------------------------ state, stop
    @property
    def open_connections(self) -> int:
        return len(self._conns)

    def shutdown(self) -> None:
        """Stop serve_forever (from another thread) and wait for it, up to 5 s."""
        self._stop.set()
        try:
            self._wake_w.send(b"\0")
        except OSError:
            pass
        self._stopped.wait(5.0)

    def server_close(self) -> None:
        for fd in list(self._conns):
            conn = self._conns[fd]
            conn.state = "read"
            self._close(fd)
        self._pool.shutdown(wait=False, cancel_futures=True)
        for s in (self._sock, self._wake_r, self._wake_w):
            try:
                s.close()
            except OSError:
                pass
        self._sel.close()
