"""The fleet view's data: many nodes' exporters read back through Prometheus.

UI-free (never imports Textual), as collect/ and model/ are:

  promapi.py   PromClient: /api/v1/query and query_range; errors as values
  labels.py    label names and values, LABEL=VALUE pairs (--match and the screen's filter)
  queries.py   every PromQL expression sent, and why it costs what it costs
  view.py      FleetView (NodeRow: a node, or a node and job; JobGroup), their JSON
  table.py     build_view() -> FleetView; timeline.py build_timeline() -> NodeTimeline
  nodejobs.py  the jobs a node's exporter names, read strictly; a node's row a row a job
  jobs.py      the job groups (a job by its own id across nodes) and the straggler rule
  source.py    FleetSource: the client, the queries and their cost, refresh by refresh
  text.py      `fleet --once`'s table and `--once --json`'s object
"""
