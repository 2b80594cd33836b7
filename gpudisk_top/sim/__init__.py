"""Simulation: a fake NVML (the only one in the project) and what drives it."""
