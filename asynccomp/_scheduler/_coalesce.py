"""In-flight coalescing: identical jobs (one cache key) share one compile.

The first job of a key to miss the cache *leads*: it is queued and compiled. Jobs of
the same key that arrive while it is queued or compiling *follow* it: they wait without
a slot and without a task, and get the leader's result (as their own) when it is done.
If the leader's call is cancelled first, its followers are handed back to the scheduler,
which queues one of them as the new leader.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ("Coalescer",)

T = TypeVar("T")


class _Group(Generic[T]):
    __slots__ = ("followers", "leader")

    def __init__(self, leader: T) -> None:
        self.leader = leader
        self.followers: dict[int, T] = {}  # by id(): leaving costs O(1)


class Coalescer(Generic[T]):
    """Leaders and followers by cache key."""

    def __init__(self) -> None:
        self._groups: dict[Hashable, _Group[T]] = {}

    def __len__(self) -> int:
        return len(self._groups)

    def __contains__(self, key: Hashable) -> bool:
        """Whether a compile of ``key`` is under way (queued or compiling)."""
        return key in self._groups

    def follow_or_lead(self, key: Hashable, item: T) -> bool:
        """``True`` if ``item`` now follows a leader of ``key``; ``False`` if it leads."""
        group = self._groups.get(key)
        if group is None:
            self._groups[key] = _Group(item)
            return False
        group.followers[id(item)] = item
        return True

    def leave(self, key: Hashable, item: T) -> None:
        """A follower gives up (its call was cancelled)."""
        group = self._groups.get(key)
        if group is not None:
            group.followers.pop(id(item), None)

    def finish(self, key: Hashable, leader: T) -> list[T]:
        """``leader`` is done (or gave up): its followers, now without a leader."""
        group = self._groups.get(key)
        if group is None or group.leader is not leader:
            return []
        del self._groups[key]
        return list(group.followers.values())
