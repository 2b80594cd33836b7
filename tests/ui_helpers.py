"""What the UI tests do alike that is not a fixture."""

from __future__ import annotations

import os


def made_with_no_color(make):
    """make()'s app, made while NO_COLOR is set: Textual reads it as the app is made (the
    app greys every colour, and its on_mount sets theme.use_no_color), and no later app
    should see it."""
    os.environ["NO_COLOR"] = "1"
    try:
        return make()
    finally:
        del os.environ["NO_COLOR"]
