"""Collectors: each reads one source and returns raw cumulative counters.

Nothing here derives a rate, and nothing here imports Textual.
"""
