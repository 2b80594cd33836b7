"""Modal screens: help, episode list, device filter."""
