"""A value that is never shown: a store's password.

An attribute holding a password in clear shows wherever an object's attributes do:
``vars()``, a debugger, a logged ``__dict__``, a pickle sent elsewhere. A
:class:`Secret` keeps it out of all of them: its ``repr`` and ``str`` are ``***``, it has
no ``__dict__`` and it refuses to be pickled; only :meth:`Secret.reveal` gives it.

>>> password = Secret("hunter2")
>>> password, str(password), f"{password}"
(***, '***', '***')
>>> password.reveal()
'hunter2'
"""

from __future__ import annotations

__all__ = ("Secret",)


class Secret:
    """``value``, shown as ``***``; :meth:`reveal` gives it (to send it to the store)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "***"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return "***"

    def __reduce__(self) -> str | tuple[object, ...]:
        raise TypeError("a secret is not pickled")
