"""Bytes read from a Secret or a token file, never printed (issue 29 item 5: its own module, so
that the configuration does not import the ModuleSet's models with it)."""

from __future__ import annotations


class SecretValue:
    """Bytes from a Secret. Printing it shows ``<redacted>``; call :meth:`reveal` to use it."""

    __slots__ = ("_value",)

    def __init__(self, value: bytes) -> None:
        self._value = value

    def reveal(self) -> bytes:
        return self._value

    def __repr__(self) -> str:
        return "SecretValue(<redacted>)"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SecretValue) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)
