"""The scheduler: the runner of an engine that compiles in this process, and of the
compile server (private).

- :mod:`.local`: the scheduler started with its backends, the one module the rest of
  asynccomp (the engine front in :mod:`asynccomp._front`, the server) builds on.
- :mod:`._pipeline`: :class:`~._pipeline.Scheduler`: key -> lookup -> coalesce
  (:mod:`._coalesce`) -> longest-first slots (:mod:`._dispatch`) -> run -> store; the
  cache (:class:`~asynccomp.cache.TieredCache`) owns its tiers, threads and checks.
- :mod:`._tally`: the one place jobs are counted; :mod:`._limits`: worker counts and
  memory.
"""
