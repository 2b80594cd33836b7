"""The Textual dashboard.  Only this package imports Textual; it reads the model only."""
