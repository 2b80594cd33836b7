"""The model: rates and verdicts derived from two raw samples. Never imports Textual."""
