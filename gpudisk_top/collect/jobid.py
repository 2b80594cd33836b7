"""Which training job a GPU process belongs to, from what the node already knows.

A shared node runs several jobs at once (Slurm jobs of 1-4 GPUs, Kubernetes pods, a sweep
of single-GPU runs): each must be judged on its own GPUs and processes.  A GPU process's
job is told, in this order, by the first rule that knows it:

  1. Slurm: the cgroup slurmstepd puts every task in (cgroup v2:
     .../slurmstepd.scope/job_N/step_S/..., v1: .../slurm/uid_U/job_N/step_S/...), else
     SLURM_JOB_ID in its environment (readable by its owner and root only);
  2. Kubernetes: the pod's UID from the kubelet's cgroup (kubepods[.slice]/.../pod<UID>);
     its namespace and name from the node's /var/log/pods/<NAMESPACE>_<POD>_<UID>, else
     POD_NAMESPACE / POD_NAME or HOSTNAME in its environment;
  3. a container: Docker, Podman, containerd, CRI-O, from the container id in the cgroup
     path; Docker's name from /var/lib/docker/containers/<ID>/config.v2.json;
  4. a systemd service of its own (not a login's: ssh, cron, getty, ...);
  5. torch elastic: TORCHELASTIC_RUN_ID in its environment (torchrun sets it on every rank);
  6. a launcher above it in the process tree (torchrun, deepspeed, accelerate, mpirun, ...):
     the topmost one;
  7. else its process tree: its topmost ancestor that is not a shell, a terminal
     multiplexer, a login or an init (a torch.multiprocessing.spawn parent, a script that
     forks its ranks): GPU processes with none of these in common are separate jobs.

Each GPU process is looked at once, when it first appears (its cgroup, its environment,
its ancestors' stat and command line: a few small reads), and kept while it lives.
Everything read here is untrusted: files are read with a byte bound, ids are kept to a
small alphabet and a length (a job id becomes a Prometheus label value and a file name's
part), names are cut to MAX_NAME characters (they are escaped where printed: textsafe,
the exporter, JSON).  What cannot be read falls to the next rule; a process of another
PID namespace (not mapped) is not looked at: the model calls such processes' job
`unknown` (model/jobs.py).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from gpudisk_top.collect.roots import Roots, read_bytes

MAX_ENVIRON_BYTES = 256 * 1024      # ARG_MAX-sized environments exist; past this, not read
MAX_CGROUP_BYTES = 64 * 1024
MAX_CONFIG_BYTES = 1024 * 1024      # a container's config.v2.json
MAX_POD_DIRS = 20_000               # /var/log/pods entries looked at for one pod
MAX_ANCESTORS = 64                  # process tree depth walked
MAX_ID = 64                         # characters of an id's token
MAX_NAME = 120                      # characters of a job's name
MAX_CACHED = 4096                   # GPU processes remembered (1,000 short-lived ones fit)

SOURCES = ("slurm", "k8s", "docker", "podman", "containerd", "crio", "systemd", "torchelastic",
           "launcher", "process", "unknown")

_SLURM_CG = re.compile(r"/(?:slurmstepd\.scope|slurm[^/]*/uid_\d+)/job_(\d{1,12})(?:/|$)")
_POD_CG = re.compile(r"kubepods.*?pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_]"
                     r"[0-9a-f]{4}[-_][0-9a-f]{12})(?:\.slice)?(?:/|$)")
_CONTAINER_CG = re.compile(r"(?:^|/)(?:(docker|libpod|cri-containerd|crio|nerdctl)-([0-9a-f]{64})"
                           r"\.scope|(docker|libpod)/([0-9a-f]{64}))(?:/|$)")
_BARE_ID_CG = re.compile(r"/([0-9a-f]{64})(?:/|$)")
_SERVICE_CG = re.compile(r"([A-Za-z0-9:_.@\\-]{1,200})\.service$")
_CONTAINER_SOURCE = {"docker": "docker", "libpod": "podman", "cri-containerd": "containerd",
                     "crio": "crio", "nerdctl": "containerd"}
# services that host logins and the commands people start from them, not a job of their own
_SESSION_SERVICES = re.compile(r"^(?:user@\d+|ssh|sshd|dropbear|cron|crond|atd|"
                               r"(?:serial-|console-)?getty@?.*|systemd-.*|login|"
                               r"docker|containerd|slurmd|slurmstepd|kubelet|jupyter.*)$")
_TOKEN = re.compile(r"[^A-Za-z0-9_.-]")
_ID_CHARS = re.compile(r"[^A-Za-z0-9_.:-]")      # a whole id's alphabet (tokens and ':')

# launchers: the topmost of them above a GPU process makes the job (by comm, the kernel's
# 15-character name, or by a python command line's module or script)
_LAUNCHER_COMMS = frozenset(("torchrun", "deepspeed", "accelerate", "mpirun", "mpiexec",
                             "orterun", "prterun", "srun", "horovodrun", "hydra_pmi_proxy"))
_LAUNCHER_ARGS = re.compile(r"(?:^|[\s/])(?:torch\.distributed\.(?:run|launch)|torchrun|"
                            r"deepspeed|accelerate(?:-launch| launch)|horovodrun)(?:\s|$)")
# what a process tree's root is not: shells, multiplexers, logins, inits, container shims
_SESSION_COMMS = frozenset(("init", "systemd", "bash", "sh", "dash", "zsh", "fish", "ksh",
                            "tcsh", "csh", "tmux", "tmux: server", "screen", "SCREEN", "sshd",
                            "sudo", "su", "login", "runuser", "setsid", "nohup", "timeout",
                            "tini", "dumb-init", "docker-init", "catatonit", "conmon", "runc",
                            "crun", "slurmstepd", "slurmd", "containerd-shim",
                            "containerd-shim-runc-v2", "sshd-session", "mosh-server",
                            "xargs", "env", "script", "make", "watch", "strace"))
_SESSION_PREFIXES = ("containerd-shim", "tmux")
_CHILD_MARKS = ("multiprocessing.spawn", "multiprocessing.forkserver", "--multiprocessing-fork")


@dataclass(frozen=True, slots=True)
class JobTag:
    """A GPU process's job as the node tells it: id "slurm:1001", "k8s:<pod uid>",
    "docker:<12 hex>", "pid:4121", ...; source (SOURCES); a name a person knows it by
    ("slurm 1001 (train.py)", "pod team-a/llama-0", "docker trainer-3")."""

    id: str
    source: str
    name: str

    def as_record(self) -> tuple[str, str, str]:
        return (self.id, self.source, self.name)


def _token(text: str, limit: int = MAX_ID) -> str:
    """An id's part: letters, digits, '_', '.', '-' only (anything else as '_'), cut."""
    return _TOKEN.sub("_", text)[:limit] or "_"


def bounded_name(text: str) -> str:
    """A job's name cut to MAX_NAME characters (escaped where printed, not here)."""
    text = text.strip()
    return text if len(text) <= MAX_NAME else text[:MAX_NAME - 1] + "…"


def tag_from_record(value) -> JobTag | None:
    """A JobTag from a recording's [id, source, name] (untrusted: anything else, None)."""
    if (isinstance(value, (list, tuple)) and len(value) == 3
            and all(isinstance(v, str) for v in value) and value[1] in SOURCES):
        # an id is tokens joined by ':' ("pid:4121", "k8s:<uid>"): ':' is kept
        job_id = _ID_CHARS.sub("_", value[0])[:MAX_ID + 16] or "_"
        return JobTag(job_id, value[1], bounded_name(value[2]))
    return None


def script_of(cmdline: str | None, comm: str | None) -> str:
    """What a person calls the program: "train.py" of "python -u /x/train.py --lr 3"; the
    module of "python -m pkg.train"; else the program's own name."""
    words = (cmdline or "").split()
    for i, w in enumerate(words):
        if w.endswith(".py"):
            return w.rsplit("/", 1)[-1]
        if w == "-m" and i + 1 < len(words):
            return words[i + 1]
    if words:
        return words[0].rsplit("/", 1)[-1]
    return comm or "?"


def environ_vars(data: bytes, wanted: tuple[str, ...]) -> dict[str, str]:
    """The wanted variables of a /proc/PID/environ text (NUL-separated)."""
    out = {}
    for item in data.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            k = key.decode("ascii", "replace")
            if k in wanted:
                out[k] = value.decode("utf-8", "replace")
    return out


_ENV_WANTED = ("SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "POD_NAME", "POD_NAMESPACE", "HOSTNAME",
               "KUBERNETES_SERVICE_HOST")


def cgroup_paths(text: str) -> list[str]:
    """Every hierarchy's path of a /proc/PID/cgroup text, v2's first."""
    paths = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[2] not in ("", "/"):
            (paths.insert(0, parts[2]) if parts[0] == "0" else paths.append(parts[2]))
    return paths


class JobIdentifier:
    """Tags GPU processes with their job (tag()); one per sampler, its cache keyed by the
    process's PID and start time (a reused PID is looked at afresh)."""

    def __init__(self, roots: Roots, rootfs: str = "/") -> None:
        self.roots = roots
        self.rootfs = rootfs
        self._cache: dict[int, tuple[object, JobTag]] = {}
        self._pod_names: dict[str, str | None] = {}
        self._container_names: dict[str, str | None] = {}

    def tag(self, pid: int, key, cmdline: str | None, comm: str | None) -> JobTag:
        """The job of the GPU process `pid` (a PID of the Roots' procfs), looked at afresh
        when `key` (what tells a reused PID: its command line) changed.  Never raises."""
        hit = self._cache.get(pid)
        if hit is not None and hit[0] == key:
            return hit[1]
        try:
            tag = self._identify(pid, cmdline, comm)
        except (OSError, ValueError, UnicodeError, RecursionError):
            tag = JobTag(f"pid:{pid}", "process", bounded_name(f"pid {pid} ({comm or '?'})"))
        if len(self._cache) >= MAX_CACHED:
            self._cache.pop(next(iter(self._cache)))
        self._cache[pid] = (key, tag)
        return tag

    def tag_all(self, procs: dict, gpu_pids) -> None:
        """Tag the GPU processes (PIDs of the procfs, `gpu_pids`) among a sample's fresh
        ProcIoRaw `procs` (their `job`), and forget those no longer GPU processes: what the
        sampler does each sample."""
        for local in gpu_pids:
            raw = procs.get(local)
            if raw is not None:
                raw.job = self.tag(local, raw.cmdline, raw.cmdline, raw.name).as_record()
        self.forget_gone(set(gpu_pids))

    def forget_gone(self, live: set[int]) -> None:
        """Drop what is kept of processes no longer GPU processes."""
        for pid in [p for p in self._cache if p not in live]:
            del self._cache[pid]

    # ------------------------------------------------------------------ the rules
    def _identify(self, pid: int, cmdline: str | None, comm: str | None) -> JobTag:
        script = script_of(cmdline, comm)
        paths = cgroup_paths(self._read(pid, "cgroup", MAX_CGROUP_BYTES).decode("utf-8", "replace"))
        env = environ_vars(self._read(pid, "environ", MAX_ENVIRON_BYTES), _ENV_WANTED)
        for path in paths:
            m = _SLURM_CG.search(path)
            if m:
                return _slurm(m.group(1), script)
        slurm_id = env.get("SLURM_JOB_ID", "")
        if slurm_id.isdigit() and len(slurm_id) <= 12:
            return _slurm(slurm_id, script)
        for path in paths:
            m = _POD_CG.search(path)
            if m:
                return self._pod(m.group(1).replace("_", "-"), env)
        for path in paths:
            m = _CONTAINER_CG.search(path)
            if m:
                kind = m.group(1) or m.group(3)
                cid = m.group(2) or m.group(4)
                return self._container(_CONTAINER_SOURCE[kind], cid)
        for path in paths:
            last = path.rstrip("/").rsplit("/", 1)[-1]
            m = _SERVICE_CG.fullmatch(last)
            if m and not _SESSION_SERVICES.match(m.group(1)):
                unit = m.group(1)
                return JobTag(f"systemd:{_token(unit)}", "systemd",
                              bounded_name(f"service {unit}.service ({script})"))
        run_id = env.get("TORCHELASTIC_RUN_ID", "")
        if run_id and run_id != "none":
            return JobTag(f"torchelastic:{_token(run_id)}", "torchelastic",
                          bounded_name(f"torchrun {run_id} ({script})"))
        return self._tree(pid, cmdline, comm)

    def _tree(self, pid: int, cmdline: str | None, comm: str | None) -> JobTag:
        """Rules 6 and 7: the topmost launcher above it, else the root of what forked or
        spawned it from one program (multiprocessing's spawn and forkserver children, a
        fork running its parent's command line).  A sweep's driver that starts each run as
        a program of its own is neither: each run is its own job."""
        chain = [(pid, comm, cmdline or "")]
        ppid = self._ppid_comm(pid)[0]
        while len(chain) < MAX_ANCESTORS:
            if ppid is None or ppid <= 1:
                break
            # one read of each ancestor's stat: its comm now, its parent for the next step
            next_ppid, pcomm = self._ppid_comm(ppid)
            if pcomm is None or pcomm in _SESSION_COMMS or pcomm.startswith(_SESSION_PREFIXES):
                break
            pcmd = self._read(ppid, "cmdline", 8192).replace(b"\0", b" ").decode(
                "utf-8", "replace").strip()
            chain.append((ppid, pcomm, pcmd))
            ppid = next_ppid
        launchers = [c for c in chain[1:] if c[1] in _LAUNCHER_COMMS or _LAUNCHER_ARGS.search(c[2])]
        script = script_of(cmdline, comm)
        if launchers:
            lpid, lcomm, lcmd = launchers[-1]
            what = lcomm if lcomm in _LAUNCHER_COMMS else script_of(lcmd, lcomm)
            return JobTag(f"pid:{lpid}", "launcher", bounded_name(f"{what} pid {lpid} ({script})"))
        i = 0
        while i + 1 < len(chain) and _forked_from(chain[i][2], chain[i + 1][2]):
            i += 1
        root, root_comm, root_cmd = chain[i]
        return JobTag(f"pid:{root}", "process",
                      bounded_name(f"pid {root} ({script_of(root_cmd, root_comm)})"))

    def _pod(self, uid: str, env: dict[str, str]) -> JobTag:
        name = self._pod_names.get(uid, "")
        if name == "":
            name = self._pod_names[uid] = self._pod_dir_name(uid)
        if name is None:
            pod, ns = env.get("POD_NAME") or env.get("HOSTNAME"), env.get("POD_NAMESPACE")
            name = f"{ns}/{pod}" if ns and pod else pod
        return JobTag(f"k8s:{_token(uid)}", "k8s",
                      bounded_name(f"pod {name}" if name else f"pod {uid[:8]}"))

    def _pod_dir_name(self, uid: str) -> str | None:
        """"NAMESPACE/POD" from the kubelet's /var/log/pods/NAMESPACE_POD_UID."""
        suffix = "_" + uid
        try:
            with os.scandir(os.path.join(self.rootfs, "var", "log", "pods")) as it:
                for n, entry in enumerate(it):
                    if n >= MAX_POD_DIRS:
                        break
                    if entry.name.endswith(suffix):
                        ns, _, pod = entry.name[:-len(suffix)].partition("_")
                        if ns and pod:
                            return f"{ns}/{pod}"
        except OSError:
            pass
        return None

    def _container(self, source: str, cid: str) -> JobTag:
        short = cid[:12]
        name = None
        if source == "docker":
            name = self._container_names.get(cid, "")
            if name == "":
                name = self._container_names[cid] = self._docker_name(cid)
        return JobTag(f"{source}:{short}", source,
                      bounded_name(f"{source} {name}" if name else f"{source} {short}"))

    def _docker_name(self, cid: str) -> str | None:
        path = os.path.join(self.rootfs, "var", "lib", "docker", "containers", cid,
                            "config.v2.json")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            data = os.read(fd, MAX_CONFIG_BYTES + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        if len(data) > MAX_CONFIG_BYTES:
            return None
        try:
            name = json.loads(data).get("Name")
        except (ValueError, AttributeError, RecursionError):
            return None
        return name.lstrip("/") or None if isinstance(name, str) else None

    # ------------------------------------------------------------------ reads
    def _read(self, pid: int, what: str, limit: int) -> bytes:
        try:
            return read_bytes(self.roots.proc(str(pid), what), max_bytes=limit)
        except OSError:
            return b""

    def _ppid_comm(self, pid: int) -> tuple[int | None, str | None]:
        """Its parent's PID and its own comm, from /proc/PID/stat."""
        data = self._read(pid, "stat", 4096)
        lo, hi = data.find(b"("), data.rfind(b")")
        if lo < 0 or hi < lo:
            return None, None
        rest = data[hi + 2:].split()
        try:
            return int(rest[1]), data[lo + 1:hi].decode("utf-8", "replace")
        except (IndexError, ValueError):
            return None, None


def _forked_from(child_cmd: str, parent_cmd: str) -> bool:
    """Did a program make this child of itself (multiprocessing, a fork), rather than start
    another program?"""
    return bool(child_cmd) and (child_cmd == parent_cmd or any(m in child_cmd for m in _CHILD_MARKS))


def _slurm(job_id: str, script: str) -> JobTag:
    return JobTag(f"slurm:{job_id}", "slurm", bounded_name(f"slurm {job_id} ({script})"))
