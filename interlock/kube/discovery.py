"""Which version of a kind the cluster serves, asked at start — and asked again when busy.

Gateway API CRDs are installed at different versions in different clusters: HTTPRoute is served
as v1 by recent releases and only as v1beta1 by older ones, and watching a version that is not
served fails with 404 forever. Asking the API server's discovery endpoint lets the informers pick
the best served version instead of guessing.

Discovery runs before anything else, so it meets the API server at its worst: starting up
(connection refused, 503), or throttling a rollout of many replicas (429 with Retry-After). One
such answer must not end the controller's start, so transient errors are retried here with the
project's :class:`~interlock.mailbox.backoff.BackoffPolicy`, within a deadline, each retry logged.
Permanent answers (401/403: the credentials may not read discovery) fail at once with a message
that says what to check; a 404 of a group-version means that version is not served.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from loguru import logger

from interlock.kube.library import ApiClient
from interlock.kube.resources import Resource
from interlock.kube.transport import KubeApiError, request_json
from interlock.mailbox.backoff import BackoffPolicy

_DEFAULT_BACKOFF = BackoffPolicy(initial=0.2, maximum=5.0)

_PERMISSION_HINT = (
    "the credentials in use may not read API discovery; check the kubeconfig (or the service "
    "account token) and that the ClusterRole grants get on the discovery endpoints"
)


class DiscoveryError(KubeApiError):
    """Discovery failed for good: a permanent answer, or transient ones until the deadline.

    Not :attr:`retryable`: the retrying already happened here, so a caller's own retry loop
    stops instead of multiplying the wait.
    """

    @property
    def retryable(self) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class DiscoveryRetry:
    """How discovery retries transient errors (no connection, 5xx, 429)."""

    backoff: BackoffPolicy = _DEFAULT_BACKOFF
    """Delay between attempts; a longer ``Retry-After`` from the server wins."""
    deadline: float = 60.0
    """Seconds after the first attempt beyond which no retry is started."""
    rng: random.Random = field(default_factory=random.Random)
    """Jitter source; tests pass a seeded one."""
    clock: Callable[[], float] = time.monotonic
    """Reads the time the deadline is measured with; tests pass a fake one."""
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    """Waits between attempts; tests pass one that advances their fake clock."""


async def _discovery_document(
    api: ApiClient, *, path: str, what: str, retry: DiscoveryRetry | None
) -> dict[str, object] | None:
    """The group-version's discovery document, or None if it is not served (404)."""
    started = retry.clock() if retry is not None else 0.0
    attempt = 0
    while True:
        try:
            return await request_json(api, method="GET", path=path, what=what)
        except KubeApiError as error:
            if error.code == 404:
                return None
            if retry is None:
                raise
            if error.code in (401, 403):
                raise DiscoveryError(
                    what=error.what,
                    code=error.code,
                    reason=error.reason,
                    message=f"{error.message} ({_PERMISSION_HINT})".lstrip(" "),
                ) from error
            if not error.retryable:
                raise DiscoveryError(
                    what=error.what, code=error.code, reason=error.reason, message=error.message
                ) from error
            delay = max(retry.backoff.delay(attempt, retry.rng), error.retry_after or 0.0)
            elapsed = retry.clock() - started
            if elapsed + delay > retry.deadline:
                raise DiscoveryError(
                    what=error.what,
                    code=error.code,
                    reason=error.reason,
                    message=f"{error.message} (still failing after {attempt + 1} attempts "
                    f"over {elapsed:.1f}s; is the API server reachable and healthy?)".lstrip(" "),
                ) from error
            attempt += 1
            logger.warning("{} (attempt {}; retrying in {:.2f}s)", error, attempt, delay)
            await retry.sleep(delay)


async def is_served(
    api: ApiClient, resource: Resource, *, retry: DiscoveryRetry | None = None
) -> bool:
    """True if ``resource``'s group/version lists its plural (GET ``/apis/<group>/<version>``).

    A 404 means the version is not served (False). With ``retry``, transient errors are retried
    and anything else raises :class:`DiscoveryError`; without it, one attempt is made and any
    other error raises :class:`KubeApiError`.
    """
    path = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
    document = await _discovery_document(
        api, path=path, what=f"discover {resource.api_version}", retry=retry
    )
    if document is None:
        return False
    resources = document.get("resources")
    if not isinstance(resources, list):
        return False
    return any(isinstance(r, dict) and r.get("name") == resource.plural for r in resources)


async def served_resource(
    api: ApiClient,
    candidates: Sequence[Resource],
    *,
    retry: DiscoveryRetry | None = None,
) -> Resource | None:
    """The first of ``candidates`` (in order of preference) that the cluster serves, or None.

    Transient errors are retried (``retry``, or :class:`DiscoveryRetry`'s defaults); a permanent
    one, or transient ones past the deadline, raise :class:`DiscoveryError`.
    """
    policy = retry if retry is not None else DiscoveryRetry()
    for candidate in candidates:
        if await is_served(api, candidate, retry=policy):
            return candidate
    return None
