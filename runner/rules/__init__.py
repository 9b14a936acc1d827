"""The rules: pure functions that decide, with no store, no HTTP and no clock read (time is passed in).

- :mod:`.gate`: how many batches may start now (the breaker, a person's pause
  and steps, the quiet time a rate limit asked for);
- :mod:`.judge`: what a finished call means for each item of its batch (split,
  retry only the invalid, classify, the attempt bound, the breaker's move,
  whether the run must stop), one function for every provider kind;
- :mod:`.bounds`: the attempt bound that ends every verdict;
- :mod:`.triage`: recovery's order over what a stopped engine left;
- :mod:`.breaker`: the breaker's transitions, over the ``Control`` row the
  store keeps;
- :mod:`.estimate`: what a batch will cost before its answer (in flight, an
  answer lost, the budget);
- :mod:`.fairshare`: a worker's share of its run's concurrency, beside the
  run's other live workers.

The engine reads the store, asks these, and has the store write the answer.
"""
