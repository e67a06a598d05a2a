"""The scheduler behind :class:`~asynccomp.Engine` (private; the public names are
re-exported by :mod:`asynccomp.engine`).

- :mod:`._engine`: the engine's lifecycle (:class:`EngineState`) and public API.
- :mod:`._plan`: planning a batch into frozen :class:`~._plan.PlannedJob` s.
- :mod:`._pipeline`: a job's way: cache -> coalesce -> queue -> compile -> deliver.
- :mod:`._coalesce`: identical jobs in flight share one compile.
- :mod:`._dispatch`: longest-first slots per backend.
- :mod:`._batch`: one call's jobs and where their results go.
- :mod:`._results`: building results; :mod:`._dumps`: the engine's dump roots;
  :mod:`._counters`: statistics; :mod:`._limits`: worker counts and memory.
"""

from __future__ import annotations

from ._engine import CompletedResults, Engine, EngineState

__all__ = ("CompletedResults", "Engine", "EngineState")
