"""Benchmarks of runner against baselines measured in the same run (scripts, not tests).

``python -m benchmarks.all`` runs them all; ``benchmarks/README.md`` says what each measures.
"""
