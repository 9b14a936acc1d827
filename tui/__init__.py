"""The Textual terminal UI over the run store (``runner tui``)."""
