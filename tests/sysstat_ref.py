"""Run the installed sysstat `iostat -x` on a scripted sequence of /proc/diskstats snapshots.

iostat cannot be pointed at another uptime, so each run happens in a private mount
namespace (`unshare -m`, root only) where fixture files are bind-mounted over
/proc/diskstats and /proc/uptime, then rewritten in place between iostat's 1-second
samples (at the half-second, well away from iostat's reads).  The result is iostat's own
JSON for every interval, to compare with gpudisk_top.diskstats.rates().
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time


# An iostat from sysstat 12.7.3 or later (which prints 0 for a counter that went down),
# for the comparison that Debian's package (12.6.1) cannot give: build one from sysstat's
# git tag (./configure && make iostat, in a copy outside this tree) and name it here.
NEWER_ENV = "GPUDISK_TOP_IOSTAT_12_7"


def version(binary: str) -> tuple[int, ...] | None:
    """sysstat's version of an iostat binary, e.g. (12, 6, 1), or None."""
    try:
        out = subprocess.run([binary, "-V"], capture_output=True, text=True, timeout=10)
    except OSError:
        return None
    m = re.search(r"sysstat version (\d+)\.(\d+)\.(\d+)", out.stdout + out.stderr)
    return tuple(int(x) for x in m.groups()) if m else None


def newer_iostat() -> tuple[str | None, str]:
    """(path of an iostat >= 12.7.3, "") or (None, why there is none)."""
    path = os.environ.get(NEWER_ENV)
    if not path:
        return None, (f"set {NEWER_ENV} to an iostat built from sysstat >= 12.7.3 (e.g. git tag "
                      "v12.7.9: ./configure && make iostat); Debian's package is 12.6.1")
    v = version(path)
    if v is None or v < (12, 7, 3):
        return None, f"{NEWER_ENV}={path} is not an iostat >= 12.7.3 (version {v})"
    return path, ""


def available() -> str | None:
    """None when the reference can run here, else the reason it cannot."""
    if shutil.which("iostat") is None:
        return "sysstat's iostat is not installed"
    if shutil.which("unshare") is None:
        return "unshare is not installed"
    if os.geteuid() != 0:
        return "bind-mounting over /proc needs root"
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        return "unshare -m is not permitted here: " + probe.stderr.decode().strip()
    return None


def run_iostat(snapshots: list[str], uptimes_cs: list[int],
               binary: str = "iostat") -> list[dict[str, dict]]:
    """iostat -x -p ALL's report for each interval of the sequence (binary: which iostat).

    snapshots[i] is the diskstats text at uptime uptimes_cs[i] (centiseconds).  Returns
    len(snapshots) - 1 reports, each {device: {iostat JSON field: value}}.
    """
    assert len(snapshots) == len(uptimes_cs) >= 2
    with tempfile.TemporaryDirectory(prefix="gdt-iostat-") as tmp:
        disk_path = os.path.join(tmp, "diskstats")
        up_path = os.path.join(tmp, "uptime")

        def put(i: int) -> None:
            for path, text in ((disk_path, snapshots[i]),
                               (up_path, f"{uptimes_cs[i] // 100}.{uptimes_cs[i] % 100:02d} 0.00\n")):
                # rewrite in place: the bind mount follows the inode, not the name
                with open(path, "r+" if os.path.exists(path) else "w") as f:
                    f.write(text)
                    f.truncate()

        put(0)
        script = (f"mount --bind {up_path} /proc/uptime && "
                  f"mount --bind {disk_path} /proc/diskstats && "
                  f"exec {shlex.quote(binary)} -x -d -p ALL -y -o JSON 1 {len(snapshots) - 1}")
        proc = subprocess.Popen(["unshare", "-m", "sh", "-c", script],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # iostat reads sample 0 at once, then one sample a second; write each next
        # snapshot half-way between reads.
        start = time.monotonic()
        for i in range(1, len(snapshots)):
            time.sleep(max(0.0, start + i - 0.5 - time.monotonic()))
            put(i)
        out, err = proc.communicate(timeout=len(snapshots) + 10)
        if proc.returncode != 0:
            raise RuntimeError(f"iostat failed: {err.strip()}")
    doc = json.loads(out)
    stats = doc["sysstat"]["hosts"][0]["statistics"]
    return [{d["disk_device"]: d for d in s["disk"]} for s in stats]
