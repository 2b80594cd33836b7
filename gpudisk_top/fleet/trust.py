"""What the fleet believes of a node's own series in the table, and the one text that says
what it doubts.

Owns three rules (model.py's _collect and _row call them; ledger.py holds those of the
GPU time lost):

- one scrape target a node: a node scraped by several Prometheus jobs (a static job and
  a PodMonitor: a common mistake) has every series once a job, under the same `instance`
  (the exporter's address, so the same exporter).  Its row takes one of them
  (one_per_instance: the live one with the latest sample), not their sum (its GPUs 16
  for 8, its starved GPUs doubled), and says so;
- one verdict a target: an exporter gives one gpudisk_top_verdict_info series.  Several
  that differ (healthy and disk-starved at once) cannot both hold: the target's state is
  BAD_DATA, not whichever came last (one_verdict), and the row says which they were;
- a row's doubts (NodeRow.doubts: figure -> why) are said in one text, doubts_text(),
  which the table's device column (fleet.text.device_text: --once and the screens) puts
  first; --json carries the doubts themselves.

No I/O; never raises.
"""

from __future__ import annotations

BAD_DATA = "bad-data"       # a target whose own series contradict each other
# the doubts made by the exporter's own numbers (said as "bad data from its exporter (...)"),
# in the order they are said; any other doubt (a scrape config's, the ledger's) follows
SERIES, VERDICTS, SCRAPES = "series", "state", "scrapes"
_EXPORTERS = (SERIES, VERDICTS)


# what a verdict says (its other labels are its target's)
_VERDICT = ("state", "kind", "devices", "gpus")


def _differ(verdicts: list[dict[str, str]]) -> bool:
    said = {tuple(v.get(k, "") for k in _VERDICT) for v in verdicts}
    return len(said) > 1


def one_verdict(verdicts: list[dict[str, str]]) -> dict[str, str] | None:
    """The target's verdict from its verdict_info series' labels: None without one, the
    one (several identical count as one), or, where they differ, a verdict of state
    BAD_DATA that blames nothing."""
    if not verdicts:
        return None
    return {"state": BAD_DATA} if _differ(verdicts) else verdicts[0]


def verdicts_doubt(verdicts: list[dict[str, str]]) -> str | None:
    """'2 verdicts at once: disk-starved, healthy' where a target's verdicts differ."""
    if not _differ(verdicts):
        return None
    states = sorted({v.get("state") or "?" for v in verdicts})
    return f"{len(verdicts)} verdicts at once: {', '.join(states)}"


def one_per_instance(keyed: dict) -> tuple[list, str | None]:
    """(the members to count, the doubt to say or None): keyed maps (job, instance) to a
    scrape target's series (model._Member).  Targets of one instance under several jobs
    are one exporter scraped several times: the live one with the latest sample counts
    (then the first job by name)."""
    by_instance: dict[str, list] = {}
    for (job, instance), member in sorted(keyed.items()):
        by_instance.setdefault(instance, []).append((job, member))
    kept, doubled = [], []
    for instance, pairs in by_instance.items():
        if len(pairs) > 1:
            doubled.append((instance, [job for job, _ in pairs]))
        # max keeps the first of equals: the first job by name
        kept.append(max((m for _, m in pairs), key=lambda m: (m.live, m.last_sample_s or 0.0)))
    if not doubled:
        return kept, None
    jobs = doubled[0][1]
    shown = ", ".join(jobs[:3]) + (", ..." if len(jobs) > 3 else "")
    more = f" (and {len(doubled) - 1} more targets)" if len(doubled) > 1 else ""
    return kept, f"scraped by {len(jobs)} jobs ({shown}): counted once{more}"


def doubts_text(doubts: dict[str, str]) -> str:
    """'bad data from its exporter (2 series dropped; 2 verdicts at once: disk-starved,
    healthy); scraped by 2 jobs (a, b): counted once; ...', '' without a doubt."""
    own = [doubts[k] for k in _EXPORTERS if k in doubts]
    rest = [v for k, v in doubts.items() if k not in _EXPORTERS]
    parts = ([f"bad data from its exporter ({'; '.join(own)})"] if own else []) + rest
    return "; ".join(parts)
