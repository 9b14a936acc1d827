"""Benchmarks of runner against baselines measured in the same run (scripts, not tests).

``python bench/run.py`` runs them all; ``bench/README.md`` says what each measures.
"""
