"""A worker's fair share of its run's concurrency: how many batches it may hold in flight of its own.

| the run's concurrency C | live workers of the run | each worker's share |
|-------------------------|-------------------------|---------------------|
| any                     | 1 (or none counted)     | C                   |
| 2                       | 2                       | 1                   |
| 5                       | 2                       | 3                   |
| 2                       | 3                       | 1                   |

A share is rounded up, so the workers together may ask for more than C:
the gate (:mod:`runner.rules.gate`) still holds all of them within C. A
worker over its share (another joined) starts nothing more until it is back
under it; the places it frees go to the others. One left alone gets C back.

Pure: the concurrency, the live workers and the worker's own batches in flight are passed in.
"""

from __future__ import annotations


def share(concurrency: int, workers: int) -> int:
    """The batches one of ``workers`` live workers may hold in flight: ``concurrency`` split evenly, rounded up."""
    return -(-concurrency // max(workers, 1))


def room(concurrency: int, *, workers: int, mine: int) -> int:
    """How many more batches a worker with ``mine`` of its own in flight may start within its share."""
    return max(share(concurrency, workers) - mine, 0)
