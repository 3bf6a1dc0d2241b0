"""Messages, topics and addresses of the edge actors (the Ingress → edge half).

One module so that the directories, the IngressActors, the EdgeActors and the wiring agree on
one name per concept. Every message says how it is traced (``trace_summary``, never a Secret
value) and, when it carries state, how it coalesces (``coalesce_key``: a newer message with the
same key replaces a queued one, so a burst of changes costs one handling of the latest state).

The topics they travel on, with who publishes and who reads them: :mod:`interlock.actors.topics`.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from interlock.model.meta import ObjectKey
from interlock.model.secret_value import SecretValue

if TYPE_CHECKING:
    # Only the edge half builds these: the status writer and the kinds' table import this
    # module's names in every controller (issue 29 item 5, memory at rest).
    from interlock.model.edge import DesiredRoute
    from interlock.model.ingress import Ingress
    from interlock.model.moduleset import Secret

INGRESS_KEY = "ingress"
HOSTS_KEY = "hosts"
MODULESET_KEY = "moduleset"
SECRET_KEY = "secret"

INGRESS_DIRECTORY = "ingress-directory"
INGRESS_CLASS_DIRECTORY = "ingressclass-directory"
MODULESET_DIRECTORY = "moduleset-directory"
SECRET_DIRECTORY = "secret-directory"
ENDPOINTS_DIRECTORY = "endpoints-directory"

INGRESS_API_VERSION = "networking.k8s.io/v1"
MODULESET_API_VERSION = "interlock.dev/v1alpha1"


def status_key(key: ObjectKey) -> str:
    """The key of an object's desired status on the status topics: ``<ns>/<name>``."""
    return f"{key.namespace}/{key.name}"


def ingress_address(namespace: str, name: str) -> str:
    return f"ingress/{namespace}/{name}"


def edge_address(host: str) -> str:
    return f"edge/{host}"


def ingress_reference(key: ObjectKey, uid: str) -> dict[str, str]:
    """The ``regarding`` reference of an Ingress for Events (``kubectl describe`` matches uid)."""
    reference = {
        "apiVersion": INGRESS_API_VERSION,
        "kind": "Ingress",
        "namespace": key.namespace,
        "name": key.name,
    }
    if uid:
        reference["uid"] = uid
    return reference


@dataclass(frozen=True, slots=True)
class SecretData:
    """What the edge reads of a Secret: its keys and their values (never printed).

    Compared by value, so the directory publishes only when a key or a value changed (not on
    every resourceVersion bump).
    """

    __trace_redact__: ClassVar[frozenset[str]] = frozenset({"values"})

    key: ObjectKey
    values: Mapping[str, SecretValue] = field(repr=False)

    @classmethod
    def from_secret(cls, secret: Secret) -> SecretData:
        keys = set(secret.raw_data) | set(secret.string_data)
        values = {name: secret.value(name) for name in sorted(keys)}
        return cls(
            key=secret.key,
            values={name: value for name, value in values.items() if value is not None},
        )

    def to_model(self) -> Secret:
        """A model Secret holding exactly these values, for the model's lookups."""
        from interlock.model.moduleset import Secret

        return Secret.model_validate(
            {
                "metadata": {"name": self.key.name, "namespace": self.key.namespace},
                "data": {
                    name: base64.b64encode(value.reveal()).decode("ascii")
                    for name, value in self.values.items()
                },
            }
        )

    def value(self, name: str) -> SecretValue | None:
        return self.values.get(name)

    def trace_summary(self) -> str:
        return f"SecretData {self.key} keys={sorted(self.values)}"


@dataclass(frozen=True, slots=True)
class IngressSpecified:
    """The retained value of ``ingress:<ns>/<name>``: the Ingress as last seen."""

    ingress: Ingress
    stored_load_balancer: dict[str, Any] | None = None
    """Its ``status.loadBalancer`` as stored (None: unknown), so that a status someone else
    wrote after this replica (an old leader's late write) is seen and repaired."""

    def trace_summary(self) -> str:
        meta = self.ingress.metadata
        return f"IngressSpecified Ingress {meta.namespace}/{meta.name} gen={meta.generation}"


@dataclass(frozen=True, slots=True)
class HostPart:
    """One Ingress's routes for one host: the retained value it publishes on ``host:<host>``."""

    ingress: ObjectKey
    uid: str
    routes: tuple[DesiredRoute, ...]

    def trace_summary(self) -> str:
        ids = ", ".join(route.route_id for route in self.routes)
        return f"HostPart Ingress {self.ingress} routes=[{ids}]"


@dataclass(frozen=True, slots=True)
class IngressHosts:
    """The retained value of ``ingress-hosts:<ns>/<name>``: hosts the Ingress has parts on."""

    hosts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PartsChanged:
    """An EdgeActor's reminder to combine the parts of its host (queued behind a burst of
    them, so the burst costs one combination)."""

    @property
    def coalesce_key(self) -> str:
        return "parts-changed"


EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True, slots=True)
class RecordEvent:
    """Ask the status writer to record a Kubernetes Event (only the leader records).

    Keyed by its whole content: an identical Event still queued is folded into one (the
    recorder would only count it again), and keyed messages are always admitted, so a burst of
    thousands of Events at start-up is never dropped for want of mailbox room.
    """

    regarding: Mapping[str, str]
    type: EventType
    reason: str
    message: str

    @property
    def coalesce_key(self) -> tuple[str, ...]:
        who = tuple(self.regarding.get(k, "") for k in ("kind", "namespace", "name", "uid"))
        return ("event", *who, self.type, self.reason, self.message)

    def trace_summary(self) -> str:
        where = f"{self.regarding.get('kind')} {self.regarding.get('namespace')}/"
        return f"RecordEvent {where}{self.regarding.get('name')} {self.type} {self.reason}"


@dataclass(frozen=True, slots=True)
class DesiredModuleSetStatus:
    """What ``status.conditions`` of a ModuleSet should be (on :data:`MODULESET_STATUS_TOPIC`)."""

    key: ObjectKey
    conditions: list[dict[str, Any]]
    uid: str = ""
    """The ModuleSet's uid: one deleted and created again under the same name is another
    object, written even when its desired status equals what the old one was given."""

    def trace_summary(self) -> str:
        reasons = " ".join(f"{c.get('type')}={c.get('reason')}" for c in self.conditions)
        return f"DesiredModuleSetStatus ModuleSet {self.key} {reasons}"


@dataclass(frozen=True, slots=True)
class DesiredIngressStatus:
    """What ``status.loadBalancer`` of an Ingress should be (on :data:`INGRESS_STATUS_TOPIC`)."""

    key: ObjectKey
    load_balancer: dict[str, Any]
    uid: str = ""
    """The Ingress's uid: one deleted and created again under the same name (unseen by the
    controller: a watch down, or a relist after 410) is another object, with no status yet."""
    stored: dict[str, Any] | None = None
    """Its ``status.loadBalancer`` as the IngressActor last saw it (None: unknown)."""

    def trace_summary(self) -> str:
        return f"DesiredIngressStatus Ingress {self.key} {self.load_balancer}"
