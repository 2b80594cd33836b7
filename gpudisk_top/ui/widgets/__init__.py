"""Dashboard panels, one module each; every panel draws with the Line API."""
