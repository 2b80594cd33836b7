"""gpudisk-top: GPUs and the disks that feed them, on one timeline."""

__version__ = "0.1.0"
