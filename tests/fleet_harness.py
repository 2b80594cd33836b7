"""A simulated fleet behind a real Prometheus on loopback, for the fleet tests, the
fixture capture (tests/fixtures/fleet/capture.py) and bench/bench_fleet.py.

    with Fleet(tmp_path) as fleet:        # the layout below, scraped every second
        fleet.base                        # http://127.0.0.1:PORT of Prometheus
        fleet.stop("stopped")             # kill one node: Prometheus marks it stale

Layout (NODES): job llama: one node disk-starved (sda), two whose GPUs wait on peers (the
`straggler` scenario: the local detector's straggler state); job bert: one cpu-starved,
one healthy, one that a test stops (its own process), one target nobody serves (down).
Every scenario starts 40 s in (serve --demo-start): each has 30 s of healthy before its
episode, and the state must hold for the whole test (until 120 s in, when they loop).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import textwrap
import threading
import time
import urllib.request

from cli_run import gdt_argv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMETHEUS = shutil.which("prometheus")
# the second backend: VictoriaMetrics single-node (Debian's victoria-metrics), scraping the
# same targets from the same prometheus.yml; vmalert (same package) evaluates rule files
VICTORIAMETRICS = shutil.which("victoria-metrics")
VMALERT = shutil.which("vmalert")
BACKENDS = {"prometheus": PROMETHEUS, "victoriametrics": VICTORIAMETRICS}
DEMO_START_S = 40
SERVE_MAX = 128

# (name, scenario or None for a target nobody serves, training_job, own process?)
NODES = (
    ("disk", "disk-starved-sata", "llama", False),
    ("peer1", "straggler", "llama", False),
    ("peer2", "straggler", "llama", False),
    ("cpu", "cpu-starved-cached", "bert", False),
    ("healthy", "healthy-cached", "bert", False),
    ("stopped", "healthy-cached", "bert", True),
    ("down", None, "bert", False),
)
EXPECTED = {"disk": "disk-starved", "peer1": "straggler", "peer2": "straggler",
            "cpu": "cpu-starved", "healthy": "healthy", "stopped": "healthy", "down": "down"}


def free_ports(n: int, taken=()) -> int:
    """A first port of n consecutive free ones on 127.0.0.1, none of them in `taken`
    (ports handed out but not bound yet)."""
    for _ in range(200):
        if n > 16:
            # a long run below the kernel's ephemeral ports (32768 on): there the server's
            # scrapes of ports not yet listening would take some as their own source ports
            base = random.randrange(20000, 32768 - n)
        else:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                base = s.getsockname()[1]
        if base + n < 65536 and all(_free(base + i) and base + i not in taken
                                    for i in range(n)):
            return base
    raise RuntimeError("no run of free ports")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


gpudisk = gdt_argv        # the fleet's tests' name for the command line (tests/cli_run.py)


def wait_until(fn, timeout_s: float, what: str):
    """fn()'s first truthy value, polling; AssertionError naming `what` after timeout_s."""
    deadline = time.monotonic() + timeout_s
    last = None
    while True:
        try:
            result = fn()
            if result:
                return result
            last = result
        except OSError as err:
            last = err
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what} "
                                 f"(last: {last!r})")
        time.sleep(0.25)


class DripServer:
    """A server on loopback that answers 200 with a long body (and `head`), then sends it
    a byte every `every_s`: each read of a client returns well within any socket timeout,
    the body never ends.  Its threads are named drip-*.  close() stops it.

        with DripServer(0.1) as drip:
            PromClient(drip.url, timeout_s=1).instant("up")      # ends at its deadline
    """

    def __init__(self, every_s: float = 0.1, head: bytes = b"") -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.every_s, self.head = every_s, head
        self.stop = threading.Event()
        threading.Thread(target=self._serve, name="drip-accept", daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._drip, args=(conn,), name="drip-conn",
                             daemon=True).start()

    def _drip(self, conn) -> None:
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 100000000\r\n\r\n" + self.head)
                while not self.stop.wait(self.every_s):
                    conn.sendall(b" ")
            except OSError:
                pass

    def close(self) -> None:
        self.stop.set()
        self.listener.close()

    def __enter__(self) -> "DripServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AnswerServer:
    """An HTTP server on loopback that gives every request the same crafted answer
    (status, content type, body; body may be a callable returning bytes, called per
    request): what a proxy, a broken Prometheus or a node's hostile exporter could put in
    front of `fleet`.  It stops by itself after lifetime_s (a test that forgets it cannot
    leave it running); close() stops it sooner.  requests: how many it answered.

        with AnswerServer(b"<html>...", "text/html") as srv:
            PromClient(srv.url).instant("up")
    """

    def __init__(self, body, content_type: str = "application/json", status: int = 200,
                 lifetime_s: float = 120.0, truncate_to: int | None = None,
                 port: int = 0) -> None:
        self.body, self.content_type, self.status = body, content_type, status
        self.truncate_to = truncate_to        # send the full Content-Length, then only this
        self.requests = 0
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", port))
        self.listener.listen(16)
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.stop = threading.Event()
        self._until = time.monotonic() + lifetime_s
        self._thread = threading.Thread(target=self._serve, name="answer-accept", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set() and time.monotonic() < self._until:
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with conn:
                try:
                    self._answer(conn)
                except OSError:
                    pass
        self.listener.close()

    def _answer(self, conn) -> None:
        conn.settimeout(5.0)
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 1 << 20:
            chunk = conn.recv(65536)
            if not chunk:
                return
            head += chunk
        headers, _, rest = head.partition(b"\r\n\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in headers.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(rest) < length:                     # the POSTed query
            chunk = conn.recv(65536)
            if not chunk:
                break
            rest += chunk
        body = self.body() if callable(self.body) else self.body
        self.requests += 1
        conn.sendall(f"HTTP/1.1 {self.status} X\r\nContent-Type: {self.content_type}\r\n"
                     f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode())
        conn.sendall(memoryview(body)[:self.truncate_to])

    def close(self) -> None:
        self.stop.set()
        self._thread.join(5)

    def __enter__(self) -> "AnswerServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


P = "gpudisk_top_"


def node_series(instance: str, now_s: float, **bad) -> list[dict]:
    """The table query's series of one disk-starved node (sda saturated, GPUs 0 and 1
    starved), as Prometheus's vector answer holds them.  bad: values to put instead, by
    the keys since, starved, last, util0, util1, await_s, queue, util_ratio, read_bps,
    gpus (the verdict's label), gpu0 (GPU 0's label)."""
    v = dict(since=now_s - 300, starved=2, last=now_s, util0=0.05, util1=0.04,
             await_s=0.048, queue=31, util_ratio=1.0, read_bps=5e8, gpus="0,1", gpu0="0")
    v.update(bad)
    target = {"instance": instance, "job": "gpudisk-top", "training_job": "llama"}
    disk = dict(target, device="sda", mountpoint="/data", **{"class": "SATA SSD"})

    def one(name, labels, value):
        return {"metric": dict(labels, __name__=P + name),
                "value": [now_s, value if isinstance(value, str) else repr(float(value))]}

    return [one("verdict_info", dict(target, state="disk-starved", kind="saturated",
                                     devices="sda", gpus=v["gpus"]), 1),
            one("state_since_timestamp_seconds", target, v["since"]),
            one("gpus_starved", target, v["starved"]),
            one("last_sample_timestamp_seconds", target, v["last"]),
            one("gpu_utilization_ratio", dict(target, gpu=v["gpu0"]), v["util0"]),
            one("gpu_utilization_ratio", dict(target, gpu="1"), v["util1"]),
            one("disk_read_await_seconds", disk, v["await_s"]),
            one("disk_queue_size", disk, v["queue"]),
            one("disk_utilization_ratio", disk, v["util_ratio"]),
            one("disk_read_bytes_per_second", disk, v["read_bps"])]


def exposition(series: list[dict]) -> bytes:
    """node_series' series as an exporter's /metrics text (the target's labels left to
    Prometheus: instance and job it adds, training_job comes from the scrape config)."""
    own = {"instance", "job", "training_job", "__name__"}
    lines = []
    for s in series:
        labels = ",".join(f'{k}="{v}"' for k, v in s["metric"].items() if k not in own)
        lines.append(f"{s['metric']['__name__']}{{{labels}}} {s['value'][1]}")
    return ("\n".join(lines) + "\n").encode()


def table_answer(*nodes: list[dict]) -> bytes:
    """Prometheus's JSON answer holding the nodes' series (node_series)."""
    import json

    result = [s for node in nodes for s in node]
    return json.dumps({"status": "success",
                       "data": {"resultType": "vector", "result": result}}).encode()


def backend_params():
    """pytest params for a fixture that runs on each backend: one skipped (with why) where
    its server is not installed."""
    import pytest

    return [pytest.param(name, id=name, marks=pytest.mark.skipif(
        path is None, reason=f"needs {name} (Debian package "
                             f"{'prometheus' if name == 'prometheus' else 'victoria-metrics'})"))
            for name, path in BACKENDS.items()]


class Fleet:
    """Starts the serve processes and the metrics server (backend: "prometheus", or
    "victoriametrics" scraping from the same config); stops them all on exit.  rules: a
    rule file the server evaluates (Prometheus's rule_files; vmalert beside
    VictoriaMetrics, writing the records back to it)."""

    def __init__(self, workdir, nodes=NODES, interval_s: float = 1.0,
                 demo_start_s: float = DEMO_START_S, scrape_s: float = 1.0,
                 backend: str = "prometheus", rules: str | None = None,
                 extra_jobs: dict[str, list[str]] | None = None) -> None:
        if BACKENDS.get(backend) is None:
            raise AssertionError(f"backend {backend!r} is not installed")
        self.backend, self.rules = backend, rules
        # more Prometheus jobs scraping some of the nodes again (job name -> node names):
        # a node scraped by a static job and a PodMonitor
        self.extra_jobs = extra_jobs or {}
        self.workdir = str(workdir)
        self.nodes = nodes
        self.interval_s = interval_s
        self.demo_start_s = demo_start_s
        self.scrape_s = scrape_s
        self.ports: dict[str, int] = {}
        self.procs: dict[str, subprocess.Popen] = {}
        self.prometheus: subprocess.Popen | None = None     # the server, either backend
        self.vmalert: subprocess.Popen | None = None
        self.base = ""

    def instance(self, name: str) -> str:
        return f"127.0.0.1:{self.ports[name]}"

    def name_of(self, instance: str) -> str:
        return next(n for n in self.ports if self.instance(n) == instance)

    # ------------------------------------------------------------------ start
    def __enter__(self) -> "Fleet":
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> None:
        shared = [n for n in self.nodes if n[1] and not n[3]]
        base = free_ports(len(shared))
        for i, node in enumerate(shared):
            self.ports[node[0]] = base + i
        for name, scenario, _job, own in self.nodes:
            if own or not scenario:                   # not scenario: nobody listens, up == 0
                self.ports[name] = free_ports(1, set(self.ports.values()))
        # the server first: the scenarios' clocks run from their start, and their states
        # must hold for the whole test however long a loaded machine takes to start it
        self._start_server()
        serving = []
        # SERVE_MAX nodes a process at most: serve's HTTP loop uses select(), which takes
        # no descriptor past 1024 (a process of 256 nodes died of it once they were scraped)
        for at in range(0, len(shared), SERVE_MAX):
            part = shared[at:at + SERVE_MAX]
            serving.append((f"shared{at // SERVE_MAX or ''}", len(part), self._serve(
                ",".join(n[1] for n in part), base + at, "--nodes", str(len(part)),
                "--seed", str(at))))
        for name, scenario, _job, own in self.nodes:
            if scenario and own:
                serving.append((name, 1, self._serve(scenario, self.ports[name], "--seed", "17")))
        for name, lines, proc in serving:
            self.procs[name] = proc
            for _ in range(lines):
                line = proc.stderr.readline()
                if not line.startswith("gpudisk-top: serving"):
                    raise AssertionError(f"serve {name}: {line}"
                                         + (proc.stderr.read() if proc.poll() is not None else ""))
            # drained from now on: a warning never blocks a node on a full pipe
            threading.Thread(target=proc.stderr.read, daemon=True).start()

    def _serve(self, demo: str, port: int, *extra: str) -> subprocess.Popen:
        return subprocess.Popen(
            gpudisk("serve", "--demo", demo, "--demo-start", f"{self.demo_start_s:g}",
                    "--listen", f"127.0.0.1:{port}", "-i", f"{self.interval_s:g}", *extra),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
            env=dict(os.environ, XDG_CONFIG_HOME=os.path.join(self.workdir, "xdg")))

    def _start_server(self) -> None:
        port = free_ports(2, set(self.ports.values()))
        by_job: dict[str, list[str]] = {}
        for name, _s, job, _own in self.nodes:
            by_job.setdefault(job, []).append(self.instance(name))
        # a node of job None: a target with no job label (its exporter names its jobs)
        groups = "".join(f"          - targets: {targets!r}\n"
                         + (f"            labels: {{training_job: {job}}}\n" if job else "")
                         for job, targets in by_job.items()).replace("'", '"')
        rules_file = self._rules_file() if self.rules else None
        rules = (f"rule_files: [{rules_file!r}]\n"
                 if rules_file and self.backend == "prometheus" else "")
        conf = os.path.join(self.workdir, "prometheus.yml")
        with open(conf, "w") as f:
            f.write(textwrap.dedent(f"""\
                global:
                  scrape_interval: {self.scrape_s:g}s
                  scrape_timeout: {self.scrape_s:g}s
                  evaluation_interval: {self.scrape_s:g}s
                scrape_configs:
                  - job_name: gpudisk-top
                    static_configs:
                """) + groups + self._extra_jobs() + rules)
        self.prom_log = os.path.join(self.workdir, f"{self.backend}.log")
        self.base = f"http://127.0.0.1:{port}"
        data = os.path.join(self.workdir, "tsdb")
        if self.backend == "prometheus":
            argv = [PROMETHEUS, f"--config.file={conf}", f"--storage.tsdb.path={data}",
                    f"--web.listen-address=127.0.0.1:{port}"]
        else:
            # strictParse=false: the config's Prometheus-only keys (evaluation_interval,
            # rule_files) are left to Prometheus.  -search.latencyOffset (how far before
            # "now" a query at now is answered, 30 s by default) is left at its default
            # for the fleet's own queries (they ask for now: promapi.py's nocache), and
            # set to the scrape interval where vmalert evaluates the rules: its queries
            # do not ask, and the records would lag 30 s (docs/fleet.md says so)
            argv = [VICTORIAMETRICS, f"-promscrape.config={conf}",
                    "-promscrape.config.strictParse=false", f"-storageDataPath={data}",
                    f"-httpListenAddr=127.0.0.1:{port}", "-loggerLevel=ERROR"]
            if self.rules:
                argv.append(f"-search.latencyOffset={self.scrape_s:g}s")
        self.prometheus = self._daemon(argv, self.prom_log)
        self._ready(self.prometheus, self.base, self.prom_log)
        if self.rules and self.backend == "victoriametrics":
            log = os.path.join(self.workdir, "vmalert.log")
            self.vmalert = self._daemon(
                [VMALERT, f"-rule={rules_file}", f"-datasource.url={self.base}",
                 f"-remoteWrite.url={self.base}", f"-evaluationInterval={self.scrape_s:g}s",
                 f"-httpListenAddr=127.0.0.1:{port + 1}", "-remoteWrite.flushInterval=1s",
                 "-loggerLevel=ERROR"], log)
            self._ready(self.vmalert, f"http://127.0.0.1:{port + 1}", log)

    def _extra_jobs(self) -> str:
        jobs = {n: job for n, _s, job, _own in self.nodes}
        return "".join(f"  - job_name: {name!r}\n    static_configs:\n" + "".join(
            f"      - targets: ['{self.instance(n)}']\n        labels: {{training_job: {jobs[n]}}}\n"
            for n in names) for name, names in self.extra_jobs.items())

    def _rules_file(self) -> str:
        """A copy of the rules whose groups run at every scrape (a group's own interval,
        the ledger's minute, would keep a test waiting for its first evaluation)."""
        import yaml

        with open(self.rules) as f:
            doc = yaml.safe_load(f)
        for group in doc["groups"]:
            group.pop("interval", None)
        path = os.path.join(self.workdir, "rules.yml")
        with open(path, "w") as f:
            yaml.safe_dump(doc, f, sort_keys=False)
        return path

    def _daemon(self, argv: list[str], log: str) -> subprocess.Popen:
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(log, "w"),
                                cwd=self.workdir)

    @staticmethod
    def _ready(proc: subprocess.Popen, base: str, log: str) -> None:
        def ready():
            if proc.poll() is not None:
                raise AssertionError(f"{proc.args[0]} exited: " + open(log).read()[-2000:])
            with urllib.request.urlopen(base + "/-/ready", timeout=1) as r:
                return r.status == 200
        wait_until(ready, 60, f"{os.path.basename(proc.args[0])} to start")

    # ------------------------------------------------------------------ stop
    def stop(self, name: str) -> None:
        """Kill a node that has its own process (SIGKILL: it stops reporting at once)."""
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait(15)

    def close(self) -> None:
        daemons = [p for p in (self.vmalert, self.prometheus) if p is not None]
        for proc in list(self.procs.values()) + daemons:
            if proc.poll() is None:
                proc.terminate()
        for proc in list(self.procs.values()) + daemons:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()
        self.prometheus = self.vmalert = None
