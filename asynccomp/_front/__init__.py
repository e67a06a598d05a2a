"""The engine's front: what :class:`~asynccomp.Engine` does with a call, whatever runs
its compiles (private; the public names are re-exported by :mod:`asynccomp.engine`).

An engine is a front over a runner (:mod:`asynccomp.runner`): this package, over the
scheduler of :mod:`asynccomp._scheduler` (compiles here or on a Ray cluster), or over a
compile server's client (:class:`asynccomp.server.ServerClient`).

- :mod:`._engine`: arguments and public calls (:mod:`._view`: what it says of
  itself); :mod:`._lifecycle`: its life (:class:`EngineState`: starting, closing, the
  calls under way); :mod:`._completed`: ``as_completed``'s block; :mod:`._assembly`:
  putting the parts together as the engine starts (and taking them apart if that fails).
- :mod:`._front`: what every call does, whatever runs the compiles: plan
  (:mod:`._plan`), hand the rendered jobs to the runner, build the results
  (:mod:`._results`), write the dumps (:mod:`._dumps`), count (the scheduler's tally).
- :mod:`._batch`: one call's jobs and where their results go.

The front imports the scheduler only through :mod:`asynccomp._scheduler.local`; the
scheduler never imports the front.
"""

from __future__ import annotations

from ._completed import CompletedResults
from ._engine import Engine
from ._lifecycle import EngineState

__all__ = ("CompletedResults", "Engine", "EngineState")
