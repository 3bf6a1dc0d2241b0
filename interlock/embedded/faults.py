"""Fault injection, so tests can prove the controller survives what real clusters do.

Real API servers drop watches, compact their history (the next watch gets 410 Expired), answer
5xx or 429 with Retry-After under load, and are slow. :class:`Faults` makes each of these happen
on demand, through the same HTTP paths clients use, so list/watch/relist and retry logic run for
real. Rules are consumed in order; each counts down the requests it matched.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from interlock.embedded.errors import ApiError


@dataclass(slots=True)
class _Rule:
    remaining: int
    verbs: frozenset[str] | None
    path_contains: str | None
    status: int = 500
    delay: float = 0.0
    retry_after: int | None = None

    @classmethod
    def of(
        cls,
        n: int,
        verbs: Collection[str] | None,
        path_contains: str | None,
        *,
        status: int = 500,
        delay: float = 0.0,
        retry_after: int | None = None,
    ) -> _Rule:
        """A rule for the next ``n`` requests with one of ``verbs`` (any when None) whose
        path contains ``path_contains`` (any when None)."""
        return cls(
            n,
            frozenset(verbs) if verbs is not None else None,
            path_contains,
            status=status,
            delay=delay,
            retry_after=retry_after,
        )

    def matches(self, verb: str, path: str) -> bool:
        if self.verbs is not None and verb not in self.verbs:
            return False
        return self.path_contains is None or self.path_contains in path


@dataclass(frozen=True, slots=True)
class InjectedFault:
    """What to do to one request: wait ``delay`` seconds, then fail with ``error`` if set."""

    delay: float
    error: ApiError | None
    retry_after: int | None


class Faults:
    """The fault-injection API of an :class:`~interlock.embedded.EmbeddedApiServer`."""

    def __init__(
        self,
        *,
        drop_watches: Callable[[], int],
        expire_watches: Callable[[], int],
        compact: Callable[[], None],
    ) -> None:
        self._drop_watches = drop_watches
        self._expire_watches = expire_watches
        self._compact = compact
        self._failures: list[_Rule] = []
        self._delays: list[_Rule] = []

    def drop_watches(self) -> int:
        """Cut every open watch connection (clients see the stream break); returns how many."""
        return self._drop_watches()

    def expire_watches(self) -> int:
        """End every open watch with an ERROR event (410 Expired); returns how many.

        A real server does this to a watcher that fell behind its history: the client must
        relist. Events still queued for the watch are not sent.
        """
        return self._expire_watches()

    def compact(self) -> None:
        """Forget the watch history: the next watch from an older resourceVersion gets 410."""
        self._compact()

    def fail_next(
        self,
        n: int,
        status: int = 500,
        *,
        verbs: Collection[str] | None = None,
        path_contains: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        """Answer the next ``n`` matching requests with ``status`` and a Status body.

        ``verbs`` are Kubernetes verbs (get, list, watch, create, update, patch, delete,
        deletecollection); ``path_contains`` matches the request path; ``retry_after`` adds a
        Retry-After header (seconds), as a server under load does with 429.
        """
        self._failures.append(
            _Rule.of(n, verbs, path_contains, status=status, retry_after=retry_after)
        )

    def delay_next(
        self,
        n: int,
        seconds: float,
        *,
        verbs: Collection[str] | None = None,
        path_contains: str | None = None,
    ) -> None:
        """Hold the next ``n`` matching requests for ``seconds`` before serving them."""
        self._delays.append(_Rule.of(n, verbs, path_contains, delay=seconds))

    def clear(self) -> None:
        """Forget every pending failure and delay."""
        self._failures.clear()
        self._delays.clear()

    def pending(self) -> int:
        """How many injected failures and delays are still to be consumed."""
        return sum(r.remaining for r in self._failures) + sum(r.remaining for r in self._delays)

    def for_request(self, *, verb: str, path: str) -> InjectedFault | None:
        delay = self._consume(self._delays, verb, path)
        failure = self._consume(self._failures, verb, path)
        if delay is None and failure is None:
            return None
        error = None
        if failure is not None:
            error = ApiError(
                failure.status,
                f"injected fault: {verb} {path} answered with {failure.status}",
            )
        return InjectedFault(
            delay=delay.delay if delay else 0.0,
            error=error,
            retry_after=failure.retry_after if failure else None,
        )

    @staticmethod
    def _consume(rules: list[_Rule], verb: str, path: str) -> _Rule | None:
        for rule in rules:
            if rule.matches(verb, path):
                rule.remaining -= 1
                if rule.remaining <= 0:
                    rules.remove(rule)
                return rule
        return None
