"""Label names, label values and LABEL=VALUE pairs: one syntax for `fleet --match` and the
fleet screen's `/` filter.

A pair is a Prometheus label name (letters, digits and _, not starting with a digit or
__), `=`, and a value, which may be put in double quotes (`rack="row 3"`; the quotes are
not part of it).  A value must be text Prometheus can hold: UTF-8.  An argument the
terminal gave in another encoding reaches Python as lone surrogates ('\\udcff' for the
byte 0xff), which no query can carry: refused here, as bad input, rather than failing
when the query is encoded.  A label given twice with different values is refused (both
cannot hold).  Every refusal is a ValueError with one line.
"""

from __future__ import annotations

import re

# JobGroup.by (fleet/view.py): how a job's nodes were found (fleet/jobs.py group_of): its
# exporters' job id, the same on every node of it (a Slurm job, a torch elastic run); a
# job id of one node's (a pod, a container, a process tree); else the value of the job
# label written on the scrape targets (an older exporter's nodes), by that label's name
BY_ID, BY_NODE = "job_id", "node"

_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# the screen's line: pairs separated by spaces or commas, a value in quotes kept whole
_WORD = re.compile(r'[^\s,"]+="[^"]*"|[^\s,]+')


def check_label(name: str, what: str = "label") -> str:
    """A Prometheus label name, else ValueError (one line)."""
    if not _LABEL_NAME.match(name or "") or name.startswith("__"):
        raise ValueError(f"{what} {name!r}: not a Prometheus label name "
                         "(letters, digits and _, not starting with a digit or __)")
    return name


def check_value(value: str, what: str) -> str:
    """A label value Prometheus can hold (UTF-8 text), else ValueError (one line)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} {value!r}: not UTF-8 text (give the value in UTF-8)") from None
    return value


def parse_pair(word: str, what: str = "--match") -> tuple[str, str]:
    """'training_job=llama' -> ('training_job', 'llama'); a quoted value loses its quotes.
    Raises ValueError (one line) for anything else."""
    label, eq, value = word.partition("=")
    label = label.strip()
    if not eq:
        raise ValueError(f"{what} {word!r}: give LABEL=VALUE (e.g. training_job=llama)")
    check_label(label, f"{what} label")
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    try:
        check_value(value, what)
    except ValueError:
        raise ValueError(f"{what} {word!r}: the value is not UTF-8 text (give it in "
                         "UTF-8)") from None
    return label, value


def parse_pairs(words, what: str = "--match") -> dict[str, str]:
    """['a=b', 'c="d e"'] -> {'a': 'b', 'c': 'd e'}.  Raises ValueError (one line) for a
    word that is not LABEL=VALUE, or a label given twice with different values."""
    out: dict[str, str] = {}
    for word in words:
        label, value = parse_pair(word, what)
        if out.get(label, value) != value:
            raise ValueError(f"{what} {label}: given twice, with different values")
        out[label] = value
    return out


def parse_filter_text(text: str, what: str = "filter") -> dict[str, str]:
    """The screen's line: 'job=a cluster=b' or 'job=a,cluster=b' -> {'job': 'a', 'cluster':
    'b'}; '' -> {}.  The pairs as parse_pairs takes them."""
    return parse_pairs(_WORD.findall(text or ""), what)


def format_filters(filters: dict[str, str]) -> str:
    """The inverse of parse_filter_text: 'cluster=a rack="row 3"'."""
    return " ".join(f'{k}="{v}"' if (" " in v or "," in v or not v) else f"{k}={v}"
                    for k, v in sorted(filters.items()))


def node_name(labels: dict[str, str], group_by: str) -> str:
    """A row's name: the --by label's value, or '(no LABEL)' for targets without it."""
    return labels.get(group_by) or _placeholder(group_by)


def label_value(node: str, group_by: str) -> str:
    """The --by label's value a row's name stands for (node_name's inverse): '' for the
    '(no LABEL)' row, whose targets lack the label (PromQL's LABEL="" matches them)."""
    return "" if node == _placeholder(group_by) else node


def _placeholder(group_by: str) -> str:
    return f"(no {group_by})"
