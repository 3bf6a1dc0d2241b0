"""The outbound actors on a real ActorSystem, fed informer-style events; no Kubernetes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from interlock.actors.durable import durable_mailbox
from interlock.actors.grants import GrantsDirectory
from interlock.actors.messages import (
    GRANTS_DIRECTORY,
    INFORMER_ROUTER,
    SERVICE_DIRECTORY,
    STATUS_WRITER,
    ObjectChanged,
)
from interlock.actors.route import RouteActor
from interlock.actors.router import InformerRouter
from interlock.actors.service_directory import ServiceDirectory
from interlock.actors.service_port_watch import ServicePortWatches
from interlock.actors.topics import (
    ROUTE_STATUS_TOPIC,
)
from interlock.api.policy_json import policy_body
from interlock.mailbox import ActorSystem
from interlock.mailbox.slot import LatestValueSlot
from interlock.mailbox.testing import RecordingActor, wait_idle
from interlock.model.policy_watch import WatchTarget
from interlock.model.service import ServicePortKey

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Outbound:
    """The outbound actors of one controller, driven like an informer would drive them."""

    system: ActorSystem
    watches: ServicePortWatches
    status_log: list[object] = field(default_factory=list)
    versions: int = 0

    def apply(self, obj: dict[str, Any]) -> None:
        self._tell(obj, deleted=False)

    def delete(self, obj: dict[str, Any]) -> None:
        self._tell(obj, deleted=True)

    def _tell(self, obj: dict[str, Any], *, deleted: bool) -> None:
        self.versions += 1
        change = ObjectChanged.of(obj, deleted=deleted, resource_version=str(self.versions))
        self.system.tell(INFORMER_ROUTER, change, correlation_id=change.identity)

    async def settle(self) -> None:
        await wait_idle(self.system)

    def watch(
        self, service: str, port: int = 80, *, namespace: str = "default", client: str | None = None
    ) -> tuple[WatchTarget, LatestValueSlot[Any]]:
        target = WatchTarget(
            ServicePortKey(namespace, service, port), client_namespace=client or namespace
        )
        return target, self.watches.open_watch(target)


def latest_policy(slot: LatestValueSlot[Any]) -> dict[str, Any]:
    assert slot.version > 0, "no policy yet"
    value = slot.latest
    assert value is not None
    policy: dict[str, Any] = json.loads(value.body)
    return policy


def start_outbound() -> Outbound:
    """The actors controller/app.py runs for the outbound half, with a recording StatusWriter."""
    system = ActorSystem()
    log: list[object] = []
    system.spawn(STATUS_WRITER, lambda: RecordingActor(log))
    # Route actors publish their desired status; the stand-in writer records the notifications.
    system.subscribe(ROUTE_STATUS_TOPIC, STATUS_WRITER)
    mailbox = durable_mailbox()
    system.spawn(SERVICE_DIRECTORY, ServiceDirectory, mailbox=mailbox)
    system.spawn(GRANTS_DIRECTORY, GrantsDirectory, mailbox=mailbox)
    system.spawn(
        INFORMER_ROUTER,
        lambda: InformerRouter(
            route_factory=lambda ns, name, outputs: RouteActor(
                namespace=ns, name=name, now=lambda: NOW, outputs=outputs
            ),
        ),
        mailbox=mailbox,
    )
    return Outbound(
        system=system,
        watches=ServicePortWatches(system, grace=0.05, encode=policy_body),
        status_log=log,
    )
