"""The status writer's one sink: how desired statuses and Events reach the API server.

:class:`~interlock.actors.status_writer.StatusWriter` decides *what* to write and *when* (leader
only, on change, with retries); it knows Kubernetes only through the
:class:`~interlock.actors.status_writer.StatusSink` protocol. :class:`KubeStatusSink` is that
protocol over the real client: a merge patch on ``/status`` through
:class:`~interlock.kube.status.StatusPatcher` (HTTPRoute at the version the cluster serves,
GRPCRoute, TLSRoute, TCPRoute, Ingress, ModuleSet) and Events through
:class:`~interlock.kube.events.EventRecorder`.
A retryable failure becomes :class:`~interlock.actors.status_writer.TransientStatusError` (the
writer retries it); a rejected patch is logged, naming the object, and reported as not written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loguru import logger

from interlock.actors.edge_messages import EventType
from interlock.actors.status_writer import StatusKind, TransientStatusError
from interlock.kube.events import EventRecorder
from interlock.kube.resources import (
    BACKEND_TLS_POLICY,
    GATEWAY,
    GATEWAY_CLASS,
    GRPC_ROUTE,
    INGRESS,
    LISTENER_SET,
    MODULE_SET,
    TCP_ROUTE,
    TLS_ROUTE,
    Resource,
)
from interlock.kube.status import PatchResult, RetryableStatusError, StatusPatcher


class KubeStatusSink:
    """The StatusWriter's boundary to Kubernetes: merge patches on ``/status`` (HTTPRoute at the
    version the cluster serves, Ingress, ModuleSet) and Events."""

    def __init__(
        self, *, patcher: StatusPatcher, recorder: EventRecorder, route_resource: Resource
    ) -> None:
        self._patcher = patcher
        self._recorder = recorder
        self._resources: Mapping[StatusKind, Resource] = {
            "HTTPRoute": route_resource,
            "GRPCRoute": GRPC_ROUTE,
            "TLSRoute": TLS_ROUTE,
            "TCPRoute": TCP_ROUTE,
            "Ingress": INGRESS,
            "ModuleSet": MODULE_SET,
            "Gateway": GATEWAY,
            "GatewayClass": GATEWAY_CLASS,
            "ListenerSet": LISTENER_SET,
            "BackendTLSPolicy": BACKEND_TLS_POLICY,
        }

    async def write_status(
        self, *, kind: StatusKind, namespace: str, name: str, status: dict[str, Any], uid: str
    ) -> bool:
        try:
            outcome = await self._patcher.patch_status(
                self._resources[kind], namespace, name, status, uid=uid
            )
        except RetryableStatusError as error:
            raise TransientStatusError(str(error)) from error
        if outcome.result is PatchResult.REJECTED:
            logger.warning(
                "{} {}/{}: status rejected ({}): {}",
                kind,
                namespace,
                name,
                outcome.code,
                outcome.message,
            )
            return False
        return True

    async def record_event(
        self, *, regarding: Mapping[str, str], type: EventType, reason: str, message: str
    ) -> None:
        await self._recorder.record(regarding=regarding, type=type, reason=reason, message=message)

    def forget(self, *, kind: StatusKind, namespace: str, name: str) -> None:
        # Found by the soak: the patcher's cache kept every object ever written.
        self._patcher.cache.forget(self._resources[kind], namespace, name)
