"""The scheduler behind :class:`~asynccomp.Engine` (private; the public names are
re-exported by :mod:`asynccomp.engine`).

An engine is a front over a runner (:mod:`asynccomp.runner`):

- :mod:`._engine`: arguments and public calls (:mod:`._view`: what it says of
  itself); :mod:`._lifecycle`: its life (:class:`EngineState`: starting, closing, the
  calls under way); :mod:`._completed`: ``as_completed``'s block; :mod:`._assembly`:
  putting the parts together as the engine starts (and taking them apart if that fails).
- :mod:`._front`: what every call does, whatever runs the compiles: plan
  (:mod:`._plan`), hand the rendered jobs to the runner, build the results
  (:mod:`._results`), write the dumps (:mod:`._dumps`), count (:mod:`._tally`).
- :mod:`._pipeline`: the scheduler, the runner of an engine that compiles here (and of
  the compile server): cache -> coalesce (:mod:`._coalesce`) -> longest-first slots
  (:mod:`._dispatch`) -> compile. :mod:`.local` starts it with its backends: the one
  module of this package that :mod:`asynccomp.server` builds on (so the server never
  reaches into an engine's insides, and an engine reaches the server only through its
  client, a runner).
- :mod:`._batch`: one call's jobs and where their results go; :mod:`._limits`: worker
  counts and memory.
"""

from __future__ import annotations

from ._completed import CompletedResults
from ._engine import Engine
from ._lifecycle import EngineState

__all__ = ("CompletedResults", "Engine", "EngineState")
