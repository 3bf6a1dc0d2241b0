"""A record of the requests the embedded server answered, for tests to assert on.

"The controller writes a route's status only when it changed" or "a relist happened after the
410" are claims about requests, not about stored state. :class:`AuditLog` keeps the last
requests (verb, path, query, status; never bodies, which may hold Secret data) so a test can
count them, the way one would read a real API server's audit log.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One answered request."""

    method: str
    verb: str
    """Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection."""
    path: str
    query: str
    status: int


class AuditLog:
    """The last ``capacity`` requests, oldest first."""

    def __init__(self, *, capacity: int = 10_000) -> None:
        self._records: deque[AuditRecord] = deque(maxlen=capacity)

    def record(self, record: AuditRecord) -> None:
        self._records.append(record)

    def __iter__(self) -> Iterator[AuditRecord]:
        return iter(list(self._records))

    def __len__(self) -> int:
        return len(self._records)

    def count(
        self,
        *,
        verb: str | None = None,
        path_contains: str | None = None,
        status: int | None = None,
    ) -> int:
        """How many recorded requests match every given criterion."""
        return sum(
            1
            for r in self._records
            if (verb is None or r.verb == verb)
            and (path_contains is None or path_contains in r.path)
            and (status is None or r.status == status)
        )

    def clear(self) -> None:
        self._records.clear()
