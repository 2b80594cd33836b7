"""Renderers for the headless outputs (text and JSON)."""
