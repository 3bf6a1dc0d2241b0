"""GatewayServiceWriter: keeps the one Service of each of interlock's Gateways in the cluster.

What the Service holds and why it exists is ``model/gateway_infrastructure.py``'s. The
GatewayController publishes it per Gateway on ``gateway-services`` (retained, only when it
changed, unpublished when the Gateway is gone or no longer ours); this actor writes it (created,
or updated when it is interlock's: ``controller/gateway_service_sink.py``) and deletes it when
its Gateway goes.

Like status, it is written only by the replica holding the Lease: every replica computes the
same Services, and two writers would only fight over ``managedFields``. On gaining the Lease it
applies every Service it wants again (what another leader did meanwhile is not known). It is a
:class:`~interlock.mailbox.Reconciler` keyed by Gateway (``ns/name``): a write that fails
transiently (no connection, 5xx, 429) is retried by the runtime with backoff and jitter; one the
API server refuses (a Service of that name that is not interlock's, say) is a terminal failure,
logged naming the Gateway and not retried until what interlock wants changes. A Gateway
deleted while no replica leads leaves its Service to Kubernetes' garbage collector (the
Service's ``ownerReferences``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Protocol

from loguru import logger

from interlock.actors.gateway_messages import DesiredGatewayService
from interlock.actors.messages import LeadershipChanged
from interlock.actors.topics import GATEWAY_SERVICES_TOPIC
from interlock.mailbox import (
    DONE,
    BackoffPolicy,
    Published,
    ReconcileError,
    Reconciler,
    TerminalError,
    TransientError,
    Unpublished,
)
from interlock.mailbox.reconciler import Result


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


DEFAULT_SERVICE_BACKOFF = BackoffPolicy(initial=0.5, maximum=60.0, jitter=0.5)


class GatewayServiceWriter(Reconciler[str]):
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
        super().__init__(backoff=backoff, rng=rng)
        self.sink = sink
        self.is_leader = is_leader
        self.desired: dict[str, DesiredGatewayService] = {}
        self.written: dict[str, dict[str, Any]] = {}
        """What this replica wrote in its current term, per Gateway (``ns/name``)."""
        self.gone: dict[str, DesiredGatewayService] = {}
        """Services to delete (their Gateway went) that are not deleted yet."""

    async def started(self) -> None:
        self.subscribe(GATEWAY_SERVICES_TOPIC)

    async def handle(self, message: object) -> object | None:
        if isinstance(message, Published) and isinstance(message.value, DesiredGatewayService):
            self.desired[message.key] = message.value
            self.gone.pop(message.key, None)
            self.request(message.key)
        elif isinstance(message, Unpublished):
            before = self.desired.pop(message.key, None)
            if before is not None:
                self.gone[message.key] = before
                self.request(message.key)
        elif isinstance(message, LeadershipChanged):
            self.written.clear()
            if message.leading:
                for key in sorted({*self.desired, *self.gone}):
                    self.request(key)
        return None

    async def reconcile(self, key: str) -> Result:
        """Make the cluster hold what is wanted for ``key`` (while leading)."""
        if not self.is_leader():
            return DONE
        wanted = self.desired.get(key)
        try:
            if wanted is not None:
                if self.written.get(key) != wanted.manifest:
                    await self.sink.apply(wanted.manifest)
                    self.written[key] = wanted.manifest
            elif (gone := self.gone.get(key)) is not None:
                meta = gone.manifest["metadata"]
                await self.sink.delete(meta["namespace"], meta["name"])
                self.gone.pop(key, None)
                self.written.pop(key, None)
        except TransientGatewayServiceError as error:
            raise TransientError(str(error)) from error
        except GatewayServiceError as error:
            self.gone.pop(key, None)
            raise TerminalError(str(error)) from error
        return DONE

    def reconcile_failed(
        self, key: str, error: ReconcileError, *, attempt: int, retry_in: float | None
    ) -> None:
        retrying = "" if retry_in is None else f" (retrying in {retry_in:.2f} s)"
        logger.warning("Gateway {}: its Service: {}{}", key, error.message, retrying)
