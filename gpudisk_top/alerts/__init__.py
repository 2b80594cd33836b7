"""Alert rules from the config file, judged on every sample, with actions.

    from gpudisk_top.alerts import AlertEngine
    engine = AlertEngine(config.sections["alerts"])
    fired = engine.update(model, verdict, free_space)   # -> list[Fired], each with .message
"""

from gpudisk_top.alerts.catalog import METRICS
from gpudisk_top.alerts.engine import AlertEngine, AlertOptions, Fired
from gpudisk_top.alerts.rules import PLACEHOLDERS, AlertRule, parse_alerts

__all__ = ["METRICS", "PLACEHOLDERS", "AlertEngine", "AlertOptions", "AlertRule", "Fired",
           "parse_alerts"]
