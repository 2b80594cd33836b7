"""Alert rules a test writes by the thousand: the [[alerts]] tables of a config file, each
a rule the loader accepts (or the last one bad), for the bounds on loading and checking
many rules.  One owner for the tests and the fault matrix."""

from __future__ import annotations


def rules_text(n: int, bad_last: bool = False) -> str:
    """n [[alerts]] rules on disk_util_pct, the last one's value a string when bad_last
    (a config the loader must refuse in one line)."""
    out = []
    for i in range(n):
        value = '"ninety"' if bad_last and i == n - 1 else str(i % 100)
        out.append(f'[[alerts]]\nname = "r{i}"\nmetric = "disk_util_pct"\nop = ">"\n'
                   f"value = {value}\nfor_samples = 3\n")
    return "\n".join(out)
