"""A small client of Prometheus's HTTP API (/api/v1/query and /api/v1/query_range).

Every problem a query can meet on the way (a refused connection, a timeout, an HTTP
error, a body that is not Prometheus's JSON, a PromQL error) becomes a QueryResult with
ok=False and a one-line `error`, never an exception: the fleet screen shows it and tries
again at the next refresh.  Only a URL that cannot be one (check_url) raises UsageError,
once, before the first query.

urllib only (no new dependency).  Queries are POSTed form-encoded, so a long selector
never meets a URL length limit; Prometheus's own `timeout` parameter is set to the
client's, so a query given up here is given up there too.  A URL with user:password@
sends them as HTTP basic auth and never shows them in a message.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from gpudisk_top.errors import UsageError

USER_AGENT = "gpudisk-top-fleet"


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


def check_url(url: str) -> str:
    """The base URL (no trailing slash) of a Prometheus server, e.g. http://host:9090 or
    https://host/prometheus.  Raises UsageError (one line) for anything else."""
    text = (url or "").strip()
    if "://" not in text:
        raise UsageError(f"--prometheus {url!r}: not a URL; give http://HOST:PORT "
                         "(e.g. http://127.0.0.1:9090)")
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port                  # raises ValueError for a port out of range
    except ValueError as err:
        raise UsageError(f"--prometheus {url!r}: {err}") from None
    if parts.scheme not in ("http", "https"):
        raise UsageError(f"--prometheus {url!r}: only http:// and https:// are spoken")
    if not parts.hostname:
        raise UsageError(f"--prometheus {url!r}: no host")
    if parts.query or parts.fragment:
        raise UsageError(f"--prometheus {url!r}: give the server's base URL, without "
                         "?query or #fragment")
    if port == 0:
        raise UsageError(f"--prometheus {url!r}: port 0")
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
        params = dict(params, timeout=f"{self.timeout_s:g}s")
        url = f"{self.base_url}/api/v1/{endpoint}"
        data = urllib.parse.urlencode(params).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded",
                   "Accept": "application/json", "User-Agent": USER_AGENT}
        if self._auth:
            headers["Authorization"] = self._auth
        request = urllib.request.Request(url, data=data, headers=headers, method="POST")
        started = time.monotonic()
        where = f"Prometheus at {self.base_url}"

        def failed(why: str) -> QueryResult:
            return QueryResult.failed(f"{where}: {why}", time.monotonic() - started)

        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                body = response.read()
        except urllib.error.HTTPError as err:
            # Prometheus answers a bad query with 400 (or 422, 503) and its JSON error
            try:
                body = err.read()
            except (OSError, http.client.HTTPException):
                body = b""
            finally:
                err.close()
            doc = _json(body)
            if isinstance(doc, dict) and doc.get("status") == "error":
                return failed(_prom_error(doc))
            return failed(f"HTTP {err.code} {err.reason}".rstrip())
        except urllib.error.URLError as err:
            return failed(_reason(err.reason, self.timeout_s))
        except (TimeoutError, socket.timeout):
            return failed(f"timed out after {self.timeout_s:g} s")
        except (OSError, http.client.HTTPException, ValueError) as err:
            return failed(_reason(err, self.timeout_s))
        return parse_answer(_json(body), where, time.monotonic() - started)


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
    except (TypeError, ValueError, KeyError, AttributeError, IndexError):
        return QueryResult.failed(f"{where}: the answer's data is not in Prometheus's "
                                  "shape", elapsed_s)
    warnings = [str(w) for w in doc.get("warnings") or [] if w]
    return QueryResult(ok=True, series=series, elapsed_s=elapsed_s, result_type=kind,
                       warnings=warnings)


def _json(body: bytes):
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
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


def _parse_data(data) -> tuple[str, list[Series]]:
    kind = data["resultType"]
    result = data["result"]
    if kind == "vector":
        return kind, [Series(labels=dict(r["metric"]), value=_number(r["value"][1]),
                             at_s=float(r["value"][0])) for r in result]
    if kind == "matrix":
        return kind, [Series(labels=dict(r["metric"]),
                             values=[(float(t), _number(v)) for t, v in r["values"]])
                      for r in result]
    if kind == "scalar":
        return kind, [Series(labels={}, value=_number(result[1]), at_s=float(result[0]))]
    if kind == "string":
        return kind, []
    raise ValueError(kind)
