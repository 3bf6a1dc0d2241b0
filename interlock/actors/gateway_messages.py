"""Messages, topics and addresses of the Gateway API north-south half (GatewayClass, Gateway).

The topics they travel on, with who publishes and who reads them: :mod:`interlock.actors.topics`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from interlock.model.meta import ObjectKey

GATEWAY_CONTROLLER = "gateway-controller"
"""The address of the one :class:`~interlock.actors.gateways.GatewayController`."""
GATEWAY_DATA_PLANE = "gateway-data-plane"
"""The address of the actor that opens and programs the Gateways' listeners."""

GATEWAY_PARENTS_KEY = "gateway"
GATEWAY_SERVICE_WRITER = "gateway-service-writer"
"""The address of the actor that writes the Gateways' Services."""


@dataclass(frozen=True, slots=True)
class GatewayParentEntries:
    """A route's ``status.parents`` entries for interlock's Gateways."""

    entries: tuple[dict[str, Any], ...]

    def trace_summary(self) -> str:
        return f"GatewayParentEntries ({len(self.entries)})"


@dataclass(frozen=True, slots=True)
class DesiredGatewayStatus:
    """The status interlock wants on a GatewayClass (``namespace`` '') or a Gateway."""

    kind: str
    key: ObjectKey
    status: dict[str, Any]
    stored: dict[str, Any] | None = None
    uid: str = ""

    def trace_summary(self) -> str:
        return f"DesiredGatewayStatus {self.kind} {self.key}"


@dataclass(frozen=True, slots=True)
class DesiredGatewayService:
    """The Service interlock keeps for a Gateway (the manifest it creates)."""

    gateway: ObjectKey
    manifest: dict[str, Any]

    def trace_summary(self) -> str:
        return f"DesiredGatewayService {self.gateway}"


@dataclass(frozen=True, slots=True)
class Recompute:
    """The GatewayController's reminder to recompute once the messages before it are handled."""

    @property
    def coalesce_key(self) -> str:
        return "recompute"


@dataclass(frozen=True, slots=True)
class PortFailures:
    """Told by the data-plane actor to the GatewayController: the ports of a Gateway it could
    not open, with why (empty: every port is open)."""

    gateway: str
    failures: tuple[tuple[int, str], ...]

    @property
    def coalesce_key(self) -> tuple[str, str]:
        return ("port-failures", self.gateway)


CA_BUNDLE_DIRECTORY = "ca-bundle-directory"
"""The address of the directory publishing the ConfigMaps' ``ca.crt`` (BackendTLSPolicy)."""
CA_BUNDLE_KEY = "ca-bundle"


@dataclass(frozen=True, slots=True)
class CABundle:
    """What interlock reads of a ConfigMap: its ``ca.crt`` (None: it has no such key)."""

    key: ObjectKey
    pem: str | None

    def trace_summary(self) -> str:
        return f"CABundle {self.key} {'ca.crt' if self.pem is not None else 'no ca.crt'}"
