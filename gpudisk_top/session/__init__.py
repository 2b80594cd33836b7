"""Sessions: the two ways samples become what the screens and outputs show.

    live.py     Feed: the live sampling thread (source -> Stepper -> History, hooks)
    replay.py   Replay (iterate a window: report, export) and ReplayFeed (seek and step:
                the replay screen), both over a recording, with one warm-up
    ticker.py   Ticker (when to sample next) and StopSignals (every signal that ends a
                process), for the dashboard, `--once`, `serve` and `record`

Both kinds feed samples through model.step.Stepper, the one per-interval step.  Nothing
is imported here, so `record` can use the ticker without loading the model.
"""
