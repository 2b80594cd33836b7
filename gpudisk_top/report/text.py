"""The text postmortem: span, time in each state per GPU, the jobs (report/jobs.py),
episodes, worst devices, the disks' health over the window (where it was read), charts."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from gpudisk_top.verdict.detect.states import STATE_GLYPH, gpu_ranges
from gpudisk_top.model.present import Col, class_tag, pct, table
from gpudisk_top.model.vocab import DISK, HEALTH, HEALTH_BADGE, phase_line
from gpudisk_top.verdict.whatif import best_line, of_json as whatif_of
from gpudisk_top.textsafe import printable, printable_lines
from gpudisk_top.verdict.ledger import NO_PRICE, Price
from gpudisk_top.report.jobs import lines as jobs_lines
from gpudisk_top.report.ledger import lines as ledger_lines
from gpudisk_top.report.summary import GPU_STATES, Summary
from gpudisk_top.report.throttle import throttle_lines
from gpudisk_top.report.tiers import tier_lines

# one letter per starved state for the charts' episode marks: the dashboard's letters
STATE_LETTERS = {s: g for s, g in STATE_GLYPH.items() if s not in ("idle", "healthy")}
WIDTH = 100


def _dur(seconds: float) -> str:
    seconds = int(round(seconds))
    d, rem = divmod(seconds, 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    parts = [f"{d}d"] * bool(d) + [f"{h}h"] * bool(h) + [f"{m}m"] * bool(m) + [f"{s}s"] * (bool(s) or seconds == 0)
    return " ".join(parts[:2] if d else parts)


def _short(iso_time: str | None) -> str:
    return "-" if iso_time is None else iso_time.replace("T", " ")[:19]


def _interval(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds:.2f}"


def render(summary: Summary, charts: bool = True, price: Price = NO_PRICE) -> str:
    d = summary.data
    out: list[str] = []
    head = f"gpudisk-top report: {d['file']}"
    kind = d.get("source_kind")
    if kind == "unknown":
        head += f"  (SOURCE UNKNOWN: {d['source']})"
    elif d["simulated"]:
        head += f"  (SIMULATED: {d['source']})"
    elif "damaged" in (d["source"] or ""):
        head += f"  ({d['source']})"
    out.append(head)
    if d.get("left_out"):
        out.append(f"sources: {d['left_out']}")
    out.append(f"host {d['host_name'] or '?'}  Linux {d['kernel'] or '?'}  recorded by gpudisk-top "
               f"{d['recorded_by'] or '?'} (format {d['format_version']}), read by {d['version']}")
    out.append(f"span {_short(d['start'])} to {_short(d['end'])} ({_dur(d['duration_s'])}, "
               f"{d['samples']} samples, interval {_interval(d['interval_s'])} s)")
    segments = d.get("segments") or []
    if len(segments) > 1:
        out.append(f"the wall clock went back {len(segments) - 1} time{'s' * (len(segments) > 2)}: "
                   f"{len(segments)} stretches, each read in recorded order ("
                   + "; ".join(f"{_short(g['start'])} to {_short(g['end'])}, {g['samples']} samples"
                               for g in segments[:4])
                   + ("; ..." if len(segments) > 4 else "") + ")")
    for g in d.get("output_gaps") or []:
        out.append(f"NOT RECORDED {_short(g['start'])} to {_short(g['end'])}: the output "
                   f"stalled, {g['samples']} samples lost (sampling went on; the recorder "
                   "could not write)")
    derived = d.get("derived")
    if derived:
        line = f"verdicts: {derived}"
        if d.get("replayed_samples"):
            line += f" ({d['replayed_samples']} samples replayed)"
        out.append(line)
    one = d.get("job") is not None
    if one:
        out.append(f"job {d['job']['id']} only (report --job): its episodes, its GPUs, "
                   "its GPU time lost and its chart")
    out.append("")
    out += _states(d)
    out += tier_lines(d)
    out += throttle_lines(d)
    if d.get("jobs_counted", True):
        out.append("")
        out += jobs_lines(d.get("jobs") or [], summary.jobs, price, d.get("jobs_left_out", 0),
                          one)
    else:
        out += ["", f"Jobs: not counted ({d.get('jobs_why_not')})"]
    out.append("")
    out += _episodes(d)
    out.append("")
    out += _devices(d)
    if d.get("ledger") is not None:
        out.append("")
        out += ledger_lines(d["ledger"], price)
    if d.get("health"):
        out.append("")
        out += _health(d["health"])
    if charts and d["samples"] > 1:
        out.append("")
        out += _charts(summary)
    if d["warnings"]:
        out.append("")
        out += [f"warning: {w}" for w in d["warnings"]]
    return printable_lines(out)


def _states(d: dict) -> list[str]:
    states = d["states"]
    if not states:
        if d.get("unavailable_s"):
            return [f"GPUs: none readable (unavailable) for {_dur(d['unavailable_s'])} of "
                    f"{_dur(d['duration_s'])}"]
        return ["GPUs: none recorded"]
    used = [s for s in GPU_STATES if any(v[s] > 0 for v in states.values())] or ["idle"]
    width = max(len(s) for s in used) + 1
    rows = [(str(idx), *(pct(per[s] / sum(per.values()) * 100 if sum(per.values()) else 0, 1)
                         for s in used)) for idx, per in states.items()]
    return [f"Time in each state, per GPU (share of {_dur(d['duration_s'])}):",
            *table(rows, (Col("GPU", 3), *(Col(s, width, ">", "" if i else " ")
                                           for i, s in enumerate(used))))]


def _episodes(d: dict) -> list[str]:
    eps = d["episodes"]
    if not eps:
        return ["Episodes: none (no GPU starved long enough to open one)"]
    # which job each is of, where the report is of several jobs
    of_job = len(d.get("jobs") or ()) > 1
    rows: list = []
    for e in eps:
        procs = ",".join(map(str, e["processes"][:4])) + (",..." if len(e["processes"]) > 4 else "")
        rows.append((str(e["id"]), e["state"], _short(e["start"]), _short(e["end"])[11:],
                     _dur(e["duration_s"]), gpu_ranges(e["gpus"]) if e["gpus"] else "-",
                     ",".join(e["devices"]) or "-", procs or "-"))
        lines = rows      # and the notes under its row
        if of_job and e.get("job_id") is not None:
            lines.append(f"     job: {e['job_id']} {e.get('job_name') or ''}".rstrip())
        if e["reason"]:
            lines += textwrap.wrap(e["reason"], WIDTH, initial_indent="     why: ",
                                   subsequent_indent="          ")
        if e["advice"]:
            lines += textwrap.wrap(e["advice"], WIDTH, initial_indent="     try: ",
                                   subsequent_indent="          ")
        summed = e.get("culprits_summed") or []
        if summed:
            lines += textwrap.wrap("; ".join(c["clause"] for c in summed[:3]), WIDTH,
                                   initial_indent="     who: ", subsequent_indent="          ")
        phases = e.get("phases") or []
        for n, p in enumerate(phases if len(phases) > 1 else (), 1):
            lines += textwrap.wrap(phase_line(n, p), WIDTH, initial_indent="   ",
                                   subsequent_indent="          ")
            best = best_line(whatif_of(p.get("whatif")))
            if best:
                lines += textwrap.wrap(best.removeprefix("best fix: "), WIDTH,
                                       initial_indent="      best: ",
                                       subsequent_indent="          ")
        best = best_line(whatif_of(e.get("whatif")))
        if best and len(phases) <= 1:
            lines += textwrap.wrap(best.removeprefix("best fix: "), WIDTH,
                                   initial_indent="    best: ", subsequent_indent="          ")
        for h in e.get("health") or ():
            on = f" (disk {h['disk']})" if h["disk"] != h["device"] else ""
            lines += textwrap.wrap(f"{h['device']}{on} {HEALTH_BADGE[h['status']]}: "
                                   + "; ".join(h["reasons"]), WIDTH,
                                   initial_indent="  health: ", subsequent_indent="          ")
    return [f"Episodes ({len(eps)}):", *table(rows, (
        Col("#", 3), Col("state", 17, "<", "  "), Col("start", 19, "<"), Col("end", 8, "<", "  "),
        Col("duration", 9, ">", "  "), Col("GPUs", 10, "<", "  "), Col("devices", 14, "<"),
        Col("processes", 0, "<")))]


def _devices(d: dict, top: int = 5) -> list[str]:
    devs = [x for x in d["devices"] if x["await_ms"] is not None][:top]
    if not devs:
        return ["Devices: none did I/O in this window"]
    # iostat's columns over the window; await (reads and writes together) and the worst
    # interval's are the report's own, read as r_await is
    ms = DISK["r_await_ms"]
    shown = [DISK[f] for f in ("r_s", "w_s", "rkb_s", "wkb_s", "util_pct")]
    rows = [(x["display_name"], class_tag(x["class"]), _dur(x["blamed_s"]) if x["blamed_s"] else "-",
             ms.text(x["await_ms"]), ms.text(x["r_await_ms"]), DISK["w_await_ms"].text(x["w_await_ms"]),
             ms.text(x["worst_await_ms"]), _short(x["worst_at"])[11:],
             *(m.text(x[m.field]) for m in shown), ",".join(x["mountpoints"]) or "-")
            for x in devs]
    r_s, w_s, rkb, wkb, util = shown
    return ["Devices (those the episodes blame first, most starved time first; then the worst "
            "await):", *table(rows, (
                Col("device", align="<"), Col("class", 5, "<"), Col("blamed", 7), Col("await", 8),
                Col(ms.label, 8), Col(DISK["w_await_ms"].label, 8), Col("worst", 8),
                Col("at", 8, "<"), Col(r_s.label, 9), Col(w_s.label, 9), Col(rkb.label, 10),
                Col(wkb.label, 10), Col(util.label, 6), Col("mountpoints", 0, "<", "  ")))]


def _gain(value, unit: str = "") -> str:
    if value is None:
        return "n/a"
    text = f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"
    return ("+" if value > 0 else "") + text + unit


def _health(health: list[dict]) -> list[str]:
    """Each disk's health over the window: its status at the end, what it gained from its
    first reading in the window to its last, and why (with its worst, when that was
    earlier and worse)."""
    # the counters' gains, under the counters' own labels
    media, log, realloc = (HEALTH[f].label for f in ("media_errors", "error_log_entries",
                                                      "reallocated_sectors"))
    rows: list = []
    for h in health:
        t = h["trend"] or {}
        warm = t.get("minutes_above_warning")
        rows.append((h["device"], HEALTH_BADGE[h["status"]], str(h["readings"]),
                     _gain(t.get("media_errors_gained")), _gain(t.get("error_log_gained")),
                     _gain(t.get("reallocated_gained")), _gain(t.get("wear_gained_pct"), "%"),
                     "n/a" if warm is None else f"{warm:.0f}m", h["model"] or "-"))
        why = "; ".join(h["reasons"])
        if h["worst_status"] != h["status"] and h["worst_reasons"]:
            why += ("; " if why else "") + f"earlier {h['worst_status']}: " + "; ".join(h["worst_reasons"])
        if why:
            rows += textwrap.wrap(why, WIDTH, initial_indent="     why: ",
                                  subsequent_indent="          ")
        for old in h.get("replaced", ()):
            was = " ".join(x for x in (old["model"], old["serial"] and f"serial {old['serial']}")
                           if x) or "another drive"
            rows += textwrap.wrap(
                f"{h['device']}: drive replaced at {_short(old['replaced_at'])}; before it "
                f"{was}, {old['readings']} readings, last {old['status']} (the numbers above "
                "are the new drive's)", WIDTH, initial_indent="     ",
                subsequent_indent="          ")
    return ["Device health (readings in the window; gained from the first to the last):",
            *table(rows, (Col("disk", max(len("disk"), *(len(h["device"]) for h in health)), "<"),
                          Col("status", 7, "<"), Col("readings", 8), Col(media, 9), Col(log, 8),
                          Col(realloc, 8), Col("wear", 6), Col(">warn", 7),
                          Col("model", 0, "<", "  ")))]


GAP_GLYPH = "/"    # along the top of a chart: a gap or a clock step, time not to scale
MAX_DISK_CHARTS = 3


@dataclass
class Chart:
    """One chart of the text report: its title, its points on the Axis's [0, BUCKETS],
    and the disk it shows (None: the GPUs' utilization)."""

    title: str
    xs: list[float]
    ys: list[float]
    device: str | None = None
    ylim: tuple[float, float] | None = None
    height: int = 14


def chart_devices(summary: Summary) -> list[tuple[str, str]]:
    """The disks to chart, each with why: those the episodes name, most episode time
    first (at most MAX_DISK_CHARTS); when no episode names a charted device, the busiest
    by %util over the window."""
    d = summary.data
    charted = summary.series.disks
    # the devices table's order (summary.blamed_by): blamed first, most episode time first
    blamed = [x for x in d["devices"] if x["blamed_s"] and x["name"] in charted]
    seconds = {x["name"]: x["blamed_s"] for x in blamed}
    if seconds:
        by_id = {e["id"]: e for e in d["episodes"]}
        out = []
        for name in sorted(seconds, key=lambda n: (-seconds[n], n))[:MAX_DISK_CHARTS]:
            eps = [by_id[i] for x in blamed if x["name"] == name for i in x["blamed_by"]]
            ids = ", ".join(str(e["id"]) for e in eps[:4]) + (", ..." if len(eps) > 4 else "")
            states = ", ".join(dict.fromkeys(e["state"] for e in eps))
            word = "episode" if len(eps) == 1 else "episodes"
            out.append((name, f"named by {word} {ids}: {states}, {_dur(seconds[name])}"))
        return out
    busy = [x for x in d["devices"] if x["util_pct"] is not None and x["name"] in charted]
    if not busy:
        return []
    top = max(busy, key=lambda x: (x["util_pct"], x["name"]))
    return [(top["name"], f"the busiest disk, {DISK['util_pct'].text(top['util_pct'])} %util; "
                          "no episode names a device")]


def chart_plan(summary: Summary) -> list[Chart]:
    """What the text report charts: the job's GPU utilization, then each disk of
    chart_devices()."""
    s = summary.series
    xs_all = s.xs()
    out = []
    if summary.job_util is not None:        # report --job: its GPUs', by GPU time
        xs = [x for x, u in zip(xs_all, summary.job_util) if u is not None]
        ys = [u for u in summary.job_util if u is not None]
        title = f"GPU utilization, % (mean of job {summary.data['job']['id']}'s GPUs)"
    else:
        xs = [x for x, n in zip(xs_all, s.gpu_util_n) if n]
        ys = [u / n for u, n in zip(s.gpu_util_sum, s.gpu_util_n) if n]
        many = len(summary.data.get("jobs") or ()) > 1
        title = f"GPU utilization, % (mean of the {'jobs' if many else 'job'}'s GPUs)"
    if xs:
        out.append(Chart(title, xs, ys, ylim=(0, 100), height=16))
    names = {x["name"]: x["display_name"] for x in summary.data["devices"]}
    for name, why in chart_devices(summary):
        disk = s.disks[name]
        xs = [x for x, n in zip(xs_all, disk.buckets_ios) if n > 0]
        ys = [w / n for w, n in zip(disk.buckets_wait, disk.buckets_ios) if n > 0]
        if xs:
            out.append(Chart(f"{names.get(name, name)} await, ms ({why})", xs, ys, device=name))
    return out


def _charts(summary: Summary) -> list[str]:
    from gpudisk_top.report.charts import clock_label, line_chart

    s = summary.series
    x_hi = float(len(s.xs()))
    ticks = ([x for x, _ in s.ticks], [clock_label(w, s.span_s) for _, w in s.ticks])
    marks = [(x0, x1, STATE_LETTERS.get(state, "?")) for x0, x1, state in s.marks]
    marks += [(x, x, GAP_GLYPH) for x in s.gaps]
    legend = ", ".join(f"{v} {k}" for k, v in STATE_LETTERS.items()
                       if any(e.state == k for e in summary.episodes))
    if s.gaps:
        legend += (", " if legend else "") + f"{GAP_GLYPH} a gap or a clock step (time is not to scale across it)"
    out = []
    for chart in chart_plan(summary):
        if out:
            out.append("")
        # a chart is many lines (render escapes each line whole, textsafe.printable_lines);
        # its title, which holds a device's name, escaped first so that it stays one
        out += line_chart(printable(chart.title), [(chart.device or "mean", chart.xs, chart.ys)],
                          marks, 0.0, x_hi, ticks, WIDTH, chart.height,
                          ylim=chart.ylim).split("\n")
    if legend:
        out.append(f"along the top: {legend}" if s.gaps else f"episodes along the top: {legend}")
    return out
