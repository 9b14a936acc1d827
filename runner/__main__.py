"""``python -m runner`` is the ``runner`` command."""

from runner.cli import main

main()
