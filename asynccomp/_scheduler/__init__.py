"""The scheduler behind :class:`~asynccomp.Engine` (private; the public names are
re-exported by :mod:`asynccomp.engine`).

An engine is a front over a runner (:mod:`asynccomp.runner`):

- :mod:`._engine`: settings, life (:class:`EngineState`) and public calls;
  :mod:`._completed`: ``as_completed``'s block; :mod:`._assembly`: putting the parts
  together as the engine starts (and taking them apart if that fails).
- :mod:`._front`: what every call does, whatever runs the compiles: plan
  (:mod:`._plan`), hand the rendered jobs to the runner, build the results
  (:mod:`._results`), write the dumps (:mod:`._dumps`), count (:mod:`._tally`).
- :mod:`._pipeline`: the scheduler, the runner of an engine that compiles here (and of
  the compile server): cache -> coalesce (:mod:`._coalesce`) -> longest-first slots
  (:mod:`._dispatch`) -> compile.
- :mod:`._batch`: one call's jobs and where their results go; :mod:`._limits`: worker
  counts and memory.
"""

from __future__ import annotations

from ._completed import CompletedResults
from ._engine import Engine, EngineState

__all__ = ("CompletedResults", "Engine", "EngineState")
