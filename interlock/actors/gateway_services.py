"""GatewayServiceWriter: keeps the one Service of each of interlock's Gateways in the cluster.

What the Service holds and why it exists is ``model/gateway_infrastructure.py``'s. The
GatewayController publishes it per Gateway on ``gateway-services`` (retained, only when it
changed, unpublished when the Gateway is gone or no longer ours); this actor writes it (created,
or updated when it is interlock's: ``controller/gateway_service_sink.py``) and deletes it when
its Gateway goes.

Like status, it is written only by the replica holding the Lease: every replica computes the
same Services, and two writers would only fight over ``managedFields``. On gaining the Lease it
applies every Service it wants again (what another leader did meanwhile is not known). A write
that fails transiently (no connection, 5xx, 429) is retried with backoff; one the API server
refuses (a Service of that name that is not interlock's, say) is logged, naming the Gateway,
and not retried until what interlock wants changes. A Gateway deleted while no replica leads
leaves its Service to Kubernetes' garbage collector (the Service's ``ownerReferences``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from loguru import logger

from interlock.actors.gateway_messages import DesiredGatewayService
from interlock.actors.messages import LeadershipChanged
from interlock.actors.topics import GATEWAY_SERVICES_TOPIC
from interlock.mailbox import Actor, BackoffPolicy, Published, Unpublished


class GatewayServiceError(Exception):
    """A write the API server refused: retrying the same write will not help."""


class TransientGatewayServiceError(Exception):
    """A write that failed in a way worth retrying (no connection, 5xx, 429)."""


class GatewayServiceSink(Protocol):
    """How Services reach the API server (``controller/gateway_service_sink.py``)."""

    async def apply(self, manifest: dict[str, Any]) -> None:
        """Create the Service ``manifest``, or update it when it is interlock's."""
        ...

    async def delete(self, namespace: str, name: str) -> None:
        """Delete the Service (gone already is fine)."""
        ...


@dataclass(frozen=True, slots=True)
class RetryGatewayService:
    """The writer's timer: try the Gateway's Service again."""

    key: str
    attempt: int


DEFAULT_SERVICE_BACKOFF = BackoffPolicy(initial=0.5, maximum=60.0, jitter=0.5)


class GatewayServiceWriter(Actor):
    """Applies and deletes the Gateways' Services; see the module docstring."""

    reconciles = "Gateway"

    def __init__(
        self,
        *,
        sink: GatewayServiceSink,
        is_leader: Callable[[], bool],
        backoff: BackoffPolicy = DEFAULT_SERVICE_BACKOFF,
        rng: random.Random | None = None,
    ) -> None:
        self.sink = sink
        self.is_leader = is_leader
        self.backoff = backoff
        self.rng = rng or random.Random()
        self.desired: dict[str, DesiredGatewayService] = {}
        self.written: dict[str, dict[str, Any]] = {}
        """What this replica wrote in its current term, per Gateway (``ns/name``)."""
        self.gone: dict[str, DesiredGatewayService] = {}
        """Services to delete (their Gateway went) that are not deleted yet."""
        self.attempts: dict[str, int] = {}

    async def started(self) -> None:
        self.subscribe(GATEWAY_SERVICES_TOPIC)

    async def receive(self, message: object) -> object | None:
        if isinstance(message, Published) and isinstance(message.value, DesiredGatewayService):
            self.desired[message.key] = message.value
            self.gone.pop(message.key, None)
            self.attempts.pop(message.key, None)
            await self._sync(message.key)
        elif isinstance(message, Unpublished):
            before = self.desired.pop(message.key, None)
            self.attempts.pop(message.key, None)
            if before is not None:
                self.gone[message.key] = before
                await self._sync(message.key)
        elif isinstance(message, LeadershipChanged):
            self.written.clear()
            if message.leading:
                for key in sorted({*self.desired, *self.gone}):
                    await self._sync(key)
        elif (
            isinstance(message, RetryGatewayService)
            and self.attempts.get(message.key) == message.attempt
        ):
            await self._sync(message.key)
        return None

    async def _sync(self, key: str) -> None:
        """Make the cluster hold what is wanted for ``key`` (while leading)."""
        if not self.is_leader():
            return
        wanted = self.desired.get(key)
        try:
            if wanted is not None:
                if self.written.get(key) == wanted.manifest:
                    return
                await self.sink.apply(wanted.manifest)
                self.written[key] = wanted.manifest
            else:
                gone = self.gone.get(key)
                if gone is None:
                    return
                meta = gone.manifest["metadata"]
                await self.sink.delete(meta["namespace"], meta["name"])
                self.gone.pop(key, None)
                self.written.pop(key, None)
        except TransientGatewayServiceError as error:
            attempt = self.attempts.get(key, 0) + 1
            self.attempts[key] = attempt
            logger.warning("Gateway {}: its Service: {} (retrying)", key, error)
            self.tell_after(
                self.backoff.delay(attempt, self.rng),
                RetryGatewayService(key, attempt),
                key=("retry", key),
            )
            return
        except GatewayServiceError as error:
            logger.warning("Gateway {}: its Service: {}", key, error)
            self.gone.pop(key, None)
        self.attempts.pop(key, None)
