"""The report's "GPU time lost" section: the stall ledger (verdict/ledger.py) over the
window, by cause, by device or mount, by episode, each with its share of all the GPU
time of the window, and how much the best predicted fix (verdict/whatif.py) of each
episode would have recovered.

The ledger is counted by the one step (verdict/step.py) as the window is replayed, and
the recorder's summaries carry what its step counted, interval by interval (record/v2/
summary.py LEDGER_FIELDS), so a window read from summaries adds those up, whatever its
length.  Summaries written before they carried it have none: then the window's raw
samples are replayed for it here, with the report's own warm-up, when the window holds
at most REPLAY_MAX_SAMPLES (a second pass over them); a longer one says so and how to
get it (`report --recompute`, which replays every sample anyway and counts the ledger in
the same pass).  The section's "counted_from" says which way it was counted, and its
"gaps" the gaps in sampling (verdict/gaps.py) that were counted nowhere, with their lengths.
"""

from __future__ import annotations

from gpudisk_top.verdict.ledger import (CAUSES, NO_PRICE, Ledger, Price, gaps_text,
                                      recovered_gpu_s)
from gpudisk_top.model.present import Col, pct, table
from gpudisk_top.model.vocab import gpu_hours
from gpudisk_top.verdict.whatif import WhatIf
from gpudisk_top.session.jobs import JobTallies
from gpudisk_top.session.replay import Replay
from gpudisk_top.session.summaries import Piece

# an hour at 1 Hz: replayed in 5-20 s on one core (a sample of an 8-GPU node through the
# model and the detector costs 1-5 ms); a longer window read from summaries written
# before they carried the ledger, which take well under a second for a day, would wait
# minutes for it
REPLAY_MAX_SAMPLES = 3600

# data["ledger"]["counted_from"]: how the window's ledger was counted
FROM_SUMMARIES = "recorded summaries"
FROM_REPLAY = "replayed samples"
FROM_OLD_SUMMARIES = "replayed samples (the recorded summaries predate the ledger)"


def replay_ledger(rec, start_s, end_s, thresholds, key_at: dict) -> tuple[Ledger, dict, JobTallies]:
    """The window's ledger, replayed, the lost time of its intervals in the recorded
    episodes, and each job's figures (session/jobs.py, where the summaries predate the
    jobs' rows): key_at (Tally.key_at) names the recorded episode of each interval, by
    (session, id), and an interval's lost time is that episode's, as the step counts it."""
    replay = Replay(rec, thresholds)
    counted = Piece()            # the ledger and the jobs, as a replayed piece counts them
    lost: dict = {}
    for i, model, verdict, loss in replay.run(rec.ranges(start_s, end_s), start_s):
        counted.interval(i, model, verdict, loss, None)
        key = key_at.get(i)
        if key is not None and loss.lost_gpu_s > 0:
            lost[key] = lost.get(key, 0.0) + loss.lost_gpu_s
    return counted.ledger, lost, counted.jobs


def section(ledger: Ledger | None, episodes: list[dict], lost: list[float],
            price: Price = NO_PRICE, why_not: str | None = None) -> dict:
    """The report JSON's "ledger": Ledger.as_json and each share of the window's GPU
    time (share_pct), the episodes' lost time (lost: each one's, session/summaries.py
    Window.lost_by_episode) and what their best fix would have recovered
    (recovered_gpu_s, by_episode).  why_not: the ledger was not counted."""
    if ledger is None:
        return {"counted": False, "why_not": why_not}
    out = {"counted": True, **ledger.as_json(price)}
    share = ledger.share_pct
    out["gpu_s"] = ledger.gpu_s
    out["share_pct"] = share(ledger.lost_gpu_s)
    out["by_cause_share_pct"] = {c: share(ledger.by_cause.get(c, 0.0)) for c in CAUSES}
    out["by_device_share_pct"] = {d: share(v) for d, v in sorted(ledger.by_device.items())}
    out["idle_share_pct"] = share(ledger.idle_gpu_s)
    ref = ledger.reference_pct if ledger.against_level else None
    rows = []
    for e, lost in zip(episodes, lost):
        phases = _phase_rows(e, ref)
        for p in phases:
            p["share_pct"] = share(p["lost_gpu_s"])
        if phases:
            # a fix recovers only the phases it was predicted for: each phase's best fix
            # on that phase's lost time (stopping fio does nothing once fio is gone)
            known = [p for p in phases if p["recovered_gpu_s"] is not None]
            fixes = list(dict.fromkeys(p["best_fix"] for p in known))
            recovered = sum(p["recovered_gpu_s"] for p in known) if known else None
            best_fix = " / ".join(fixes) if fixes else None
        else:
            whatif = [WhatIf.from_json(w) for w in e.get("whatif") or ()]
            best = whatif[0] if whatif else None
            best_fix = best.fix if best is not None else None
            recovered = recovered_gpu_s(lost, best, ref) if best else None
        rows.append({"id": e["id"], "state": e["state"], "lost_gpu_s": lost,
                     "share_pct": share(lost), "best_fix": best_fix,
                     "recovered_gpu_s": recovered, "cost": price.cost(lost),
                     "phases": phases})
    out["by_episode"] = rows
    known = [r for r in rows if r["recovered_gpu_s"] is not None]
    out["recovered_gpu_s"] = sum(r["recovered_gpu_s"] for r in known) if known else None
    return out


def _phase_rows(e: dict, ref: float | None) -> list[dict]:
    """Each phase of an episode (its JSON) with its lost time counted (Ledger.lost_of_phase),
    its best fix and what that would have recovered of the phase; [] where the episode
    has no phase counted (a recording whose summaries predate phases)."""
    phases = e.get("phases") or []
    if not phases or any(p.get("lost_gpu_s") is None for p in phases):
        return []
    out = []
    for n, p in enumerate(phases, 1):
        whatif = [WhatIf.from_json(w) for w in p.get("whatif") or ()]
        best = whatif[0] if whatif else None
        out.append({"phase": n, "lost_gpu_s": p["lost_gpu_s"],
                    "best_fix": best.fix if best is not None else None,
                    "recovered_gpu_s": recovered_gpu_s(p["lost_gpu_s"], best, ref)
                    if best is not None else None})
    return out


def _pct(v: float | None) -> str:
    """A share of the ledger, to 0.1 % as its GPU-hours are to 0.01."""
    return pct(v, 1)


def lines(d: dict, price: Price = NO_PRICE) -> list[str]:
    """The text report's section, from its JSON (section())."""
    if not d.get("counted"):
        return [f"GPU time lost: not counted ({d.get('why_not')})"]
    cost = price.text
    head = (f"GPU time lost: {gpu_hours(d['lost_gpu_s'])} GPU-h of {gpu_hours(d['gpu_s'])} "
            f"({_pct(d['share_pct'])}), below {d['reference']['text']}")
    if cost(d["lost_gpu_s"]) is not None:
        head += f"; cost {cost(d['lost_gpu_s'])}"
    if d.get("counted_from") == FROM_OLD_SUMMARIES:
        head += f"; counted from {FROM_OLD_SUMMARIES}"
    out = [head]
    gaps = gaps_text(d.get("gaps"))      # verdict/gaps.py: said, never counted as GPU time
    if gaps is not None:
        out.append(f"  {gaps}")
    priced = price.gpu_hour_cost is not None

    def row(name: str, v: float, share: float | None, last: str = "") -> tuple:
        return (f"  {name}", gpu_hours(v), _pct(share), (cost(v) or "") if priced else last)

    def cols(title: str, last: str = "cost") -> tuple:
        return (Col(f"  {title}", 24, "<"), Col("GPU-h", 8), Col("share", 7),
                Col(last if priced or last != "cost" else "", 0, "<", "  "))

    out += table([row(c if c != "healthy" else "healthy (unused)", d["by_cause"][c],
                      d["by_cause_share_pct"][c]) for c in CAUSES if d["by_cause"][c] > 0]
                 + [row("idle GPUs (no job)", d["idle_gpu_s"], d["idle_share_pct"])],
                 cols("by cause"))
    if d["by_device"]:
        out += table([row(name, v, d["by_device_share_pct"][name])
                      for name, v in d["by_device"].items()], cols("by device or mount"))
    if d["by_episode"]:
        rows = []
        for e in d["by_episode"]:
            rec = e["recovered_gpu_s"]
            fix = f"{gpu_hours(rec)} by {e['best_fix']}" if rec is not None else "-"
            rows.append((f"  #{e['id']} {e['state']}", gpu_hours(e["lost_gpu_s"]),
                         _pct(e["share_pct"]), fix + (f"; cost {cost(e['lost_gpu_s'])}"
                                                      if priced else "")))
            for p in e.get("phases") or () if len(e.get("phases") or ()) > 1 else ():
                prec = p["recovered_gpu_s"]
                rows.append((f"    phase {p['phase']}", gpu_hours(p["lost_gpu_s"]),
                             _pct(p["share_pct"]),
                             f"{gpu_hours(prec)} by {p['best_fix']}" if prec is not None else "-"))
        out += table(rows, cols("by episode", "best fix would recover"))
    if d["recovered_gpu_s"] is not None:
        out.append(f"  the episodes' best fixes would have recovered "
                   f"{gpu_hours(d['recovered_gpu_s'])} of {gpu_hours(d['lost_gpu_s'])} GPU-h")
    return out
