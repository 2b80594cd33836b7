"""The fleet's one source: a PromClient, the queries, and what they cost.

    source = FleetSource(PromClient("http://prometheus:9090"))
    view = source.refresh()                      # each refresh (the screen's: every 5 s)
    tl = source.node_timeline(view.rows[0].node, window_s=3600, width=120)   # on Enter
    source.retarget(group_by="cluster", filters={"training_job": "llama"})   # g, /

refresh() sends the table's one instant query, and the sparkline and ledger queries only
when they are due (every spark_every_s, 60 s by default): at most 1 + 2/12 queries a
refresh at 5 s.  A failed query ends the refresh's queries (the table's: no other is sent,
and its error says so; the sparkline's: the ledger's waits for the next minute), so a
server that does not answer costs a refresh one --timeout, not one a query.
Both read the recording rules' series (examples/fleet-rules.yml) where the server has
them, the raw series otherwise: the first refresh asks for the records, and each answer
says whether they are there (queries.RULES_LABEL).  An answer in the recorded form
without them (no rules loaded, or no longer) is asked again at once in the raw form (one
query more, that refresh); a raw answer that shows them moves the next refresh to the
recorded form.
node_timeline() sends one range query, for that node only (a row that gathers several
scrape targets, --by cluster, is no one node: refused, with why).  Neither raises for what
Prometheus does (down, slow, an error): the view or timeline carries the one-line error,
and a failed refresh keeps the last good rows (view.data_wall_s says when they were read).

Thread-safety: one caller at a time (the screen's worker thread).
"""

from __future__ import annotations

import time

from gpudisk_top.fleet import queries
from gpudisk_top.fleet.labels import check_label, check_value, label_value
from gpudisk_top.fleet.promapi import PromClient, QueryResult
from gpudisk_top.fleet.table import build_view
from gpudisk_top.fleet.timeline import NodeTimeline, build_timeline, timeline_window
from gpudisk_top.fleet.view import FleetView, NodeRow, QueryCost


class FleetSource:
    """client: a PromClient; group_by: the label that names a node (a row); job_label:
    the label that names a training job (job groups); filters: label -> value, every
    query restricted to them; exporter_job: the Prometheus job that scrapes the exporters
    (its failing targets are shown down even if never seen); spark_every_s: seconds
    between sparkline queries.  Raises ValueError (one line) for a label name that is not
    one, or a value that is not UTF-8.  job: the job view's job (FleetView.only_job):
    its key, id or name, or the job label's value."""

    def __init__(self, client: PromClient, group_by: str = "instance",
                 job_label: str = "training_job", filters: dict[str, str] | None = None,
                 spark_every_s: float = 60.0, clock=time.monotonic,
                 exporter_job: str = queries.EXPORTER_JOB, job: str | None = None) -> None:
        self.client = client
        self.group_by = check_label(group_by, "--by")
        self.job_label = check_label(job_label, "--job-label")
        self.filters = _checked(filters or {})
        if not exporter_job:
            raise ValueError("--exporter-job: give the Prometheus job name that scrapes "
                             "the exporters (default gpudisk-top)")
        self.exporter_job = check_value(exporter_job, "--exporter-job")
        # the job view (--job): the rows of that job only, found in the whole table (a job
        # found by its id has no label on its targets to filter by)
        self.job = None if job is None else check_value(job, "--job")
        self.spark_every_s = spark_every_s
        self.recorded = True                      # until an answer says the rules are not there
        self.table_expr = self.spark_expr = self.ledger_expr = ""
        self._exprs()
        self.cost = QueryCost()                   # every query sent, all refreshes
        self.refreshes = 0
        self._clock = clock
        self._spark: QueryResult | None = None
        self._ledger: QueryResult | None = None
        self._spark_at: float | None = None
        self._last: FleetView | None = None

    @property
    def url(self) -> str:
        return self.client.base_url

    def retarget(self, group_by: str | None = None,
                 filters: dict[str, str] | None = None) -> None:
        """Other rows from the next refresh on: grouped by another label, or other
        filters (None: keep).  The sparkline is due again at once (its series are per
        group) and the last good rows are forgotten (they are the old question's).
        Raises ValueError (one line) for a label name that is not one, changing
        nothing."""
        group_by = self.group_by if group_by is None else check_label(group_by, "--by")
        filters = _checked(self.filters if filters is None else filters)
        self.group_by, self.filters = group_by, filters
        self._exprs()
        self._spark = self._ledger = self._spark_at = self._last = None

    def _exprs(self) -> None:
        self.table_expr = queries.table_query(self.filters, self.exporter_job, self.recorded)
        self.spark_expr = queries.spark_query(self.group_by, self.filters, self.recorded)
        self.ledger_expr = queries.ledger_query(self.filters, self.recorded)

    def spark_due(self) -> bool:
        return self._spark_at is None or self._clock() - self._spark_at >= self.spark_every_s

    def refresh(self, now_s: float | None = None, spark: bool | None = None) -> FleetView:
        """This refresh's view (see the module's docstring).  spark: force the sparkline
        and ledger queries (True) or skip them (False); default: when due."""
        now = time.time() if now_s is None else now_s
        table = self.client.instant(self.table_expr)
        cost = QueryCost().add(table)
        read_recorded = self.recorded
        if table.ok and has_rules(table) != self.recorded:
            self.recorded = not self.recorded
            self._exprs()
            if not self.recorded:                 # no records to read: this answer lacks the GPUs
                table = self.client.instant(self.table_expr)
                cost.add(table)
                read_recorded = False
        if not table.ok:
            # a server that did not answer the table within --timeout would not answer
            # the next query either: the refresh gives up at one deadline, not one a query
            table = QueryResult.failed(f"{table.error} (no other query sent)", table.elapsed_s)
        elif spark if spark is not None else self.spark_due():
            result = self.client.instant(self.spark_expr)
            # the same after a failed sparkline: the ledger is asked at the next minute
            ledger = (self.client.instant(self.ledger_expr) if result.ok else
                      QueryResult.failed("not asked: the sparkline's query failed"))
            cost.add(result).add(ledger if result.ok else None)
            self._spark_at = self._clock()
            if result.ok or self._spark is None:
                self._spark = result
            if ledger.ok or self._ledger is None:
                self._ledger = ledger
        self.cost = self.cost + cost
        self.refreshes += 1
        view = build_view(table, self._spark, now, self.group_by, self.job_label,
                          url=self.url, cost=cost, ledger=self._ledger)
        view.recorded = table.ok and read_recorded
        if table.ok and self.job is not None:
            view.only_job(self.job)
        if table.ok:
            self._last = view
        elif self._last is not None:              # keep showing the last good rows
            view.rows, view.jobs = self._last.rows, self._last.jobs
            view.lost_by_cause = self._last.lost_by_cause
            view.data_wall_s = self._last.data_wall_s
        return view

    def row(self, node: str) -> NodeRow | None:
        """The node's row in the last good refresh (None: not in it, or none yet)."""
        rows = self._last.rows if self._last is not None else []
        return next((r for r in rows if r.node == node), None)

    def node_timeline(self, node: str, window_s: float, width: int,
                      now_s: float | None = None) -> NodeTimeline:
        """One node's last window_s seconds, one column per step (queries.timeline_step_s:
        max(1 s, window / width)), from one range query.  A row of the last refresh that
        gathers several scrape targets is refused (the timeline's error says why; no
        query is sent): their series would be drawn as one node's."""
        step = queries.timeline_step_s(window_s, width)
        start, end = timeline_window(time.time() if now_s is None else now_s, window_s, step)
        why = not_one_node(self.row(node), self.group_by)
        if why:
            return build_timeline(QueryResult.failed(why), node, start, end, step)
        expr = queries.timeline_query(self.group_by, label_value(node, self.group_by),
                                      self.filters)
        result = self.client.range(expr, start, end, step)
        self.cost.add(result)
        return build_timeline(result, node, start, end, step)


def has_rules(table: QueryResult) -> bool:
    """The table's answer says the recording rules' series are there."""
    return any(queries.RULES_LABEL in s.labels for s in table.series)


def not_one_node(row: NodeRow | None, group_by: str) -> str | None:
    """Why a row has no one timeline (it gathers several scrape targets), else None."""
    if row is None or len(row.members) < 2:
        return None
    shown = ", ".join(row.members[:3]) + (", ..." if len(row.members) > 3 else "")
    return (f"{group_by}={row.node} gathers {len(row.members)} scrape targets ({shown}): a "
            "timeline is one node's: group the rows by instance, or filter, to open one")


def _checked(filters: dict[str, str]) -> dict[str, str]:
    """The filters, every name and value checked (ValueError, one line, now rather than at
    the first query)."""
    for label, value in filters.items():
        check_label(label, "filter label")
        check_value(value, f"filter {label}=")
    return dict(filters)
