"""A small client of Prometheus's HTTP API (/api/v1/query and /api/v1/query_range).

Every problem a query can meet on the way (a refused connection, a timeout, an HTTP
error, a body that is not Prometheus's JSON, a PromQL error) becomes a QueryResult with
ok=False and a one-line `error`, never an exception: the fleet screen shows it and tries
again at the next refresh.  Only a URL that cannot be one (check_url) raises UsageError,
once, before the first query.

urllib only (no new dependency).  Queries are POSTed form-encoded, so a long selector
never meets a URL length limit; Prometheus's own `timeout` parameter is set to the
client's, so a query given up here is given up there too; nocache=1 asks
VictoriaMetrics for now, not its default 30 s before (_get).  A URL with user:password@
sends them as HTTP basic auth and never shows them in a message (redact()).

The timeout is a deadline for the whole query (connecting, sending, the answer's headers
and body), not a limit per socket read: a server that sends a byte a second cannot keep
a query alive past it.  The answer is read up to MAX_ANSWER_BYTES.  Redirects are refused,
not followed: urllib would turn the POST into a GET without its query and send the basic
auth on to wherever the redirect points; the error names the final URL to give instead.
"""

from __future__ import annotations

import base64
import functools
import http.client
import io
import json
import math
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from gpudisk_top.errors import UsageError
from gpudisk_top.textsafe import printable

USER_AGENT = "gpudisk-top-fleet"
# an answer larger than this is refused: 64 nodes' table is ~1 MB, a node's hour of
# timeline ~5 MB; a runaway answer must not fill the screen process's memory
MAX_ANSWER_BYTES = 64 * 2**20
_CHUNK_BYTES = 64 * 1024
# JSON objects and numbers an answer may hold: a series is 2 objects and a number or two,
# a range point a number (1,000 nodes' table ~100k, a node's hour at 1 s ~110k).  Decoding
# stops at the first beyond it, so memory stays a small multiple of MAX_ANSWER_BYTES (a
# 64 MiB answer of tiny series would otherwise become ~1.5 million dicts and GBs)
MAX_ANSWER_ITEMS = 400_000


@dataclass
class Series:
    """One series of a result.  labels: every label, __name__ included when the result
    keeps it; value: a vector's (or scalar's) value; values: a matrix's (time_s, value)
    points.  Prometheus's NaN and ±Inf come through as float('nan') and ±inf."""

    labels: dict[str, str]
    value: float | None = None
    at_s: float | None = None
    values: list[tuple[float, float]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.labels.get("__name__", "")


@dataclass
class QueryResult:
    """What one query gave.  ok: Prometheus answered with status "success"; error: one
    line saying why not ("Prometheus at http://h:9090: timed out after 3 s"); series: the
    result (empty when not ok); elapsed_s: the round trip; result_type: "vector",
    "matrix", "scalar", "string", or "" when not ok; warnings: Prometheus's, if any."""

    ok: bool
    error: str | None = None
    series: list[Series] = field(default_factory=list)
    elapsed_s: float = 0.0
    result_type: str = ""
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def failed(cls, error: str, elapsed_s: float = 0.0) -> "QueryResult":
        return cls(ok=False, error=error, elapsed_s=elapsed_s)


def redact(url: str) -> str:
    """The URL with its user-info (user:password@) shown as ***@: what a message may say
    of a URL.  Works on text that is not a valid URL too (no scheme, a bad port).  Errs on
    the side of hiding: everything up to the last @ before any ?query or #fragment goes,
    so a password with an unescaped / in it is hidden too."""
    text = str(url)
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "", text
    ends = [i for i in (rest.find(c) for c in "?#") if i >= 0]
    end = min(ends) if ends else len(rest)
    at = rest.rfind("@", 0, end)
    if at >= 0:
        rest = "***" + rest[at:]
    return scheme + sep + rest


def check_url(url: str) -> str:
    """The base URL (no trailing slash) of a Prometheus server, e.g. http://host:9090 or
    https://host/prometheus.  Raises UsageError (one line, the URL's user-info redacted)
    for anything else."""
    text = (url or "").strip()
    shown = f"--prometheus {redact(text)!r}"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"{shown}: not UTF-8 text") from None
    if "://" not in text:
        raise UsageError(f"{shown}: not a URL; give http://HOST:PORT "
                         "(e.g. http://127.0.0.1:9090)")
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port                  # raises ValueError for a port out of range
    except ValueError as err:
        # urllib's own words may quote the URL's parts (the password among them): not
        # repeated
        why = ("not a valid IPv6 address in brackets" if "IPv6" in str(err) else
               "the port is not a number from 1 to 65535" if "Port" in str(err) else
               "not a valid URL")
        raise UsageError(f"{shown}: {why}") from None
    if parts.scheme not in ("http", "https"):
        raise UsageError(f"{shown}: only http:// and https:// are spoken")
    if not parts.hostname:
        raise UsageError(f"{shown}: no host")
    if parts.query or parts.fragment:
        raise UsageError(f"{shown}: give the server's base URL, without ?query or #fragment")
    if port == 0:
        raise UsageError(f"{shown}: port 0")
    return text.rstrip("/")


def _number(text) -> float:
    """Prometheus's sample value: a string ("0.5", "NaN", "+Inf")."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


class PromClient:
    """Queries one Prometheus server.  base_url: as check_url() takes it (raises
    UsageError when it is not a URL); timeout_s: the most one query may take, socket
    waits and Prometheus's own evaluation alike."""

    def __init__(self, base_url: str, timeout_s: float = 3.0) -> None:
        base = check_url(base_url)
        parts = urllib.parse.urlsplit(base)
        self._auth = None
        if parts.username is not None:
            user = urllib.parse.unquote(parts.username)
            password = urllib.parse.unquote(parts.password or "")
            self._auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
            host = parts.hostname if ":" not in (parts.hostname or "") else f"[{parts.hostname}]"
            netloc = host + (f":{parts.port}" if parts.port else "")
            base = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", "")).rstrip("/")
        self.base_url = base          # what messages show: never a password
        self.timeout_s = float(timeout_s)

    def __repr__(self) -> str:
        return f"PromClient({self.base_url!r}, timeout_s={self.timeout_s:g})"

    # ------------------------------------------------------------------ queries
    def instant(self, expr: str, at_s: float | None = None) -> QueryResult:
        """`expr` evaluated at at_s (Unix seconds; default: Prometheus's now)."""
        params = {"query": expr}
        if at_s is not None:
            params["time"] = f"{at_s:.3f}"
        return self._get("query", params)

    def range(self, expr: str, start_s: float, end_s: float, step_s: float) -> QueryResult:
        """`expr` at start_s, start_s + step_s, ... up to end_s (a matrix)."""
        return self._get("query_range", {"query": expr, "start": f"{start_s:.3f}",
                                         "end": f"{end_s:.3f}", "step": f"{step_s:g}"})

    # ------------------------------------------------------------------ transport
    def _get(self, endpoint: str, params: dict[str, str]) -> QueryResult:
        started = time.monotonic()
        deadline = started + self.timeout_s
        where = f"Prometheus at {self.base_url}"

        def failed(why: str) -> QueryResult:
            return QueryResult.failed(f"{where}: {why}", time.monotonic() - started)

        try:
            # nocache=1: VictoriaMetrics answers a query at "now" as of its
            # -search.latencyOffset before (30 s by default) unless told not to cache,
            # and a node stopped 20 s ago would read live; Prometheus, Thanos and Mimir
            # ignore the parameter
            params = dict(params, timeout=f"{self.timeout_s:g}s", nocache="1")
            data = urllib.parse.urlencode(params).encode()
            headers = {"Content-Type": "application/x-www-form-urlencoded",
                       "Accept": "application/json", "User-Agent": USER_AGENT}
            if self._auth:
                headers["Authorization"] = self._auth
            request = urllib.request.Request(f"{self.base_url}/api/v1/{endpoint}", data=data,
                                             headers=headers, method="POST")
            with _opener(deadline).open(request, timeout=self.timeout_s) as response:
                body = _read_capped(response)
            doc = _json(body)
            del body                       # the decoded answer replaces it in memory
        except _Redirected as err:
            return failed(f"redirected to {_one_line(redact(err.location))} (HTTP {err.code}): "
                          "give the final URL")
        except _TooLarge:
            cap = MAX_ANSWER_BYTES
            return failed("the answer is larger than "
                          + (f"{cap // 2**20} MiB" if cap % 2**20 == 0 else f"{cap} bytes"))
        except _TooMany:
            return failed(f"the answer holds more than {MAX_ANSWER_ITEMS:,} series or "
                          "points: narrow the query (--match)")
        except urllib.error.HTTPError as err:
            # Prometheus answers a bad query with 400 (or 422, 503) and its JSON error
            try:
                body = _read_capped(err)
            except (OSError, http.client.HTTPException, _TooLarge):
                body = b""
            finally:
                err.close()
            try:
                doc = _json(body)
            except _TooMany:
                doc = None
            if isinstance(doc, dict) and doc.get("status") == "error":
                return failed(_prom_error(doc))
            return failed(_one_line(f"HTTP {err.code} {err.reason}".rstrip()))
        except urllib.error.URLError as err:
            return failed(_reason(err.reason, self.timeout_s))
        except (TimeoutError, socket.timeout):
            return failed(f"timed out after {self.timeout_s:g} s")
        except (OSError, http.client.HTTPException, ValueError) as err:
            return failed(_reason(err, self.timeout_s))
        return parse_answer(doc, where, time.monotonic() - started)


class _Redirected(Exception):
    def __init__(self, code: int, location: str) -> None:
        super().__init__(code, location)
        self.code, self.location = code, location


class _TooLarge(Exception):
    pass


class _TooMany(Exception):
    pass


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """Every 3xx with a Location (301, 302, 303, 307, 308) ends the query, before urllib
    looks at where it points; one without a Location is an HTTP error like any other."""

    def http_error_302(self, req, fp, code, msg, headers):
        location = headers.get("location") or headers.get("uri")
        if location is None:
            return None
        fp.close()
        raise _Redirected(code, urllib.parse.urljoin(req.full_url, location))

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


class _DeadlineSocket:
    """A connected socket whose every send and receive may wait only until the deadline
    (time.monotonic()): the socket's timeout is set to the time left before each one, and
    none starts after it (TimeoutError).  http.client reads the answer through makefile()."""

    def __init__(self, sock, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline

    def arm(self) -> None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the query's deadline passed")
        self._sock.settimeout(left)

    def sendall(self, data, *args):
        self.arm()
        return self._sock.sendall(data, *args)

    def makefile(self, mode="r", *args, **kwargs):
        # the socket's own SocketIO (it keeps the socket open while the answer is read,
        # after urllib closes the connection's reference), each read armed first
        return io.BufferedReader(_DeadlineReader(self, self._sock.makefile("rb", buffering=0)))

    def __getattr__(self, name):
        return getattr(self._sock, name)


class _DeadlineReader(io.RawIOBase):
    def __init__(self, owner: _DeadlineSocket, raw) -> None:
        super().__init__()
        self._owner, self._raw = owner, raw

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        self._owner.arm()
        return self._raw.readinto(buffer)

    def close(self) -> None:
        self._raw.close()
        super().close()


class _DeadlineConnection:
    """Mixed into http.client's connections: the socket, once connected (and wrapped in
    TLS), keeps to the query's deadline."""

    deadline = math.inf

    def __init__(self, *args, deadline: float, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.deadline = deadline

    def connect(self) -> None:
        self.timeout = max(0.001, min(self.timeout, self.deadline - time.monotonic()))
        super().connect()
        self.sock = _DeadlineSocket(self.sock, self.deadline)


class _HTTP(_DeadlineConnection, http.client.HTTPConnection):
    pass


class _HTTPS(_DeadlineConnection, http.client.HTTPSConnection):
    pass


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: float) -> None:
        super().__init__()
        self.deadline = deadline

    def http_open(self, req):
        return self.do_open(functools.partial(_HTTP, deadline=self.deadline), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: float) -> None:
        super().__init__()
        self.deadline = deadline

    def https_open(self, req):
        return self.do_open(functools.partial(_HTTPS, deadline=self.deadline), req,
                            context=self._context)


def _opener(deadline: float) -> urllib.request.OpenerDirector:
    """urllib's opener (proxies from the environment, as urlopen), with the query's
    deadline on its sockets and redirects refused."""
    return urllib.request.build_opener(_HTTPHandler(deadline), _HTTPSHandler(deadline),
                                       _RefuseRedirects())


def _read_capped(response) -> bytearray:
    """The body, MAX_ANSWER_BYTES at most (_TooLarge beyond), read in chunks (each under
    the socket's deadline) into one buffer (never the chunks and their join at once)."""
    body = bytearray()
    # read1: what has arrived (at most one socket read), not a wait for a full chunk
    read = getattr(response, "read1", response.read)
    while True:
        chunk = read(_CHUNK_BYTES)
        if not chunk:
            return body
        if len(body) + len(chunk) > MAX_ANSWER_BYTES:
            raise _TooLarge()
        body += chunk


def parse_answer(doc, where: str = "Prometheus", elapsed_s: float = 0.0) -> QueryResult:
    """A QueryResult from Prometheus's decoded JSON answer (a dict; anything else is
    an error).  Never raises."""
    if not isinstance(doc, dict) or "status" not in doc:
        return QueryResult.failed(f"{where}: the answer is not Prometheus's JSON "
                                  "(is this the Prometheus server's URL?)", elapsed_s)
    if doc.get("status") != "success":
        return QueryResult.failed(f"{where}: {_prom_error(doc)}", elapsed_s)
    try:
        kind, series = _parse_data(doc.get("data"))
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError):
        return QueryResult.failed(f"{where}: the answer's data is not in Prometheus's "
                                  "shape", elapsed_s)
    given = doc.get("warnings")
    warnings = [_one_line(w) for w in given[:10] if w] if isinstance(given, list) else []
    return QueryResult(ok=True, series=series, elapsed_s=elapsed_s, result_type=kind,
                       warnings=warnings)


def _json(body):
    """The decoded JSON, or None for a body that is not JSON (a proxy's HTML page, a
    truncated answer, nesting deeper than Python's stack).  Raises _TooMany past
    MAX_ANSWER_ITEMS objects and numbers.  Integers come back as floats (an integer of
    400 digits is inf, never an OverflowError later)."""
    count = [0]

    def counted(make):
        def hook(value):
            count[0] += 1
            if count[0] > MAX_ANSWER_ITEMS:
                raise _TooMany()
            return make(value)
        return hook

    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    try:
        return json.loads(text, object_pairs_hook=counted(dict), parse_float=counted(float),
                          parse_int=counted(float), parse_constant=counted(float))
    except (ValueError, RecursionError):
        return None


def _one_line(text: str, limit: int = 300) -> str:
    """What a server said, as one line of printable text (its escapes shown, not sent)."""
    text = printable(" ".join(str(text).split()))
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _prom_error(doc: dict) -> str:
    kind = doc.get("errorType") or "error"
    return _one_line(f"{kind}: {doc.get('error') or 'no reason given'}")


def _reason(reason, timeout_s: float) -> str:
    """A URLError's or socket error's reason as a few words."""
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return f"timed out after {timeout_s:g} s"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, socket.gaierror):
        return f"cannot resolve the host name ({reason.strerror or reason})"
    if isinstance(reason, http.client.RemoteDisconnected):
        return "the server closed the connection without an answer"
    if isinstance(reason, OSError) and reason.strerror:
        return _one_line(reason.strerror[0].lower() + reason.strerror[1:])
    return _one_line(str(reason) or type(reason).__name__)


def _labels(metric) -> dict[str, str]:
    """A series' labels: text names to text values (anything else: ValueError), each
    one Unicode can encode (_encodable)."""
    if not isinstance(metric, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metric.items()):
        raise ValueError("labels")
    return {_encodable(k): _encodable(v) for k, v in metric.items()}


def _encodable(text: str) -> str:
    """The text, a lone surrogate in it (JSON's "\\udcff" escape decodes to one: no
    UTF-8 can carry it, and printing it ends in UnicodeEncodeError) shown as its escape
    (the six characters \\udcff), so the label is printed, compared and sent as text."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _parse_data(data) -> tuple[str, list[Series]]:
    kind = data["resultType"]
    result = data["result"]
    if kind in ("vector", "matrix") and not isinstance(result, list):
        raise ValueError(kind)
    if kind == "vector":
        return kind, [Series(labels=_labels(r["metric"]), value=_number(r["value"][1]),
                             at_s=float(r["value"][0])) for r in result]
    if kind == "matrix":
        return kind, [Series(labels=_labels(r["metric"]),
                             values=[(float(t), _number(v)) for t, v in r["values"]])
                      for r in result]
    if kind == "scalar":
        return kind, [Series(labels={}, value=_number(result[1]), at_s=float(result[0]))]
    if kind == "string":
        return kind, []
    raise ValueError(kind)
