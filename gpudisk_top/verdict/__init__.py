"""What the measurements mean: the verdict's wing.

`model/` holds what was measured (rates of disks, GPUs, hosts, mounts, processes, loader
time); this package holds what it means for the training job, and only reads `model/`:

    detect/     the starvation detector: the job, saturation, the states and their evidence
    whatif/     what each fix would gain, from the input pipeline's model
    ceiling.py  whether a device's stored probe is believed
    step.py     one sample pair -> model -> verdict -> ledger, the one step every surface takes
    gaps.py     when an interval is a gap in sampling, not time
    ledger.py   GPU time lost, by cause and by episode
"""
