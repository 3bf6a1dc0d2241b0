"""networking.k8s.io/v1 Ingress and IngressClass, and which Ingresses are ours.

An Ingress is parsed leniently: a rule with a bad path type, no host or a ``resource`` backend is
kept in the model and reported by :mod:`interlock.model.edge` for that rule alone, so one bad rule
never takes the rest of the Ingress (or the controller) down. Only values that make the object
unreadable as a whole (a port number that is not a number, no metadata) raise
:class:`~interlock.model.meta.InvalidObject`.

Which controller serves an Ingress is decided by its class (:func:`is_ours`). Getting this wrong
means two controllers fighting over one host, so the rule follows Kubernetes exactly and is
written once, here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from interlock.model.meta import (
    KubeModel,
    KubeObject,
    ObjectMeta,
    parse_namespaced,
    parse_object,
)

CONTROLLER_NAME = "interlock.dev/ingress-controller"
"""``spec.controller`` of the IngressClasses interlock serves."""

MODULES_ANNOTATION = "interlock.dev/modules"
"""Ingress annotation naming ModuleSets in the Ingress's namespace: ``set-a,set-b``."""

DEFAULT_CLASS_ANNOTATION = "ingressclass.kubernetes.io/is-default-class"
"""IngressClass annotation marking the class used by Ingresses that name none."""

LEGACY_CLASS_ANNOTATION = "kubernetes.io/ingress.class"
"""The pre-v1 way to name a class; still written by many charts, so still honoured."""


class ServiceBackendPort(KubeModel):
    """A Service port, by number or by name (exactly one of them is meaningful)."""

    number: int | None = None
    name: str | None = None


class IngressServiceBackend(KubeModel):
    name: str
    port: ServiceBackendPort = Field(default_factory=ServiceBackendPort)


class TypedLocalObjectReference(KubeModel):
    api_group: str | None = Field(None, alias="apiGroup")
    kind: str = ""
    name: str = ""


class IngressBackend(KubeModel):
    service: IngressServiceBackend | None = None
    resource: TypedLocalObjectReference | None = None


class HTTPIngressPath(KubeModel):
    """One path of a rule. ``path_type`` stays a string so a bad value is a per-rule error."""

    path: str = ""
    path_type: str = Field("", alias="pathType")
    backend: IngressBackend = Field(default_factory=IngressBackend)


class HTTPIngressRuleValue(KubeModel):
    paths: list[HTTPIngressPath] = Field(default_factory=list)


class IngressRule(KubeModel):
    host: str = ""
    http: HTTPIngressRuleValue | None = None


class IngressTLS(KubeModel):
    hosts: list[str] = Field(default_factory=list)
    secret_name: str = Field("", alias="secretName")


class IngressSpec(KubeModel):
    ingress_class_name: str | None = Field(None, alias="ingressClassName")
    default_backend: IngressBackend | None = Field(None, alias="defaultBackend")
    rules: list[IngressRule] = Field(default_factory=list)
    tls: list[IngressTLS] = Field(default_factory=list)


class Ingress(KubeObject):
    spec: IngressSpec = Field(default_factory=IngressSpec)

    def module_set_names(self) -> tuple[str, ...]:
        """The ModuleSets named by the modules annotation, in order (blank entries skipped)."""
        raw = self.metadata.annotations.get(MODULES_ANNOTATION, "")
        return tuple(name.strip() for name in raw.split(",") if name.strip())


class IngressClassSpec(KubeModel):
    controller: str = ""


class IngressClass(KubeModel):
    metadata: ObjectMeta
    spec: IngressClassSpec = Field(default_factory=IngressClassSpec)

    @property
    def is_default(self) -> bool:
        return self.metadata.annotations.get(DEFAULT_CLASS_ANNOTATION, "") == "true"

    @property
    def is_ours(self) -> bool:
        return self.spec.controller == CONTROLLER_NAME


def parse_ingress(raw: dict[str, Any]) -> Ingress:
    """Parse a v1 Ingress; raises :class:`InvalidObject` naming the Ingress and the field."""
    return parse_namespaced(Ingress, "Ingress", raw)


@dataclass(frozen=True, slots=True)
class StoredIngress:
    """An Ingress and its ``status.loadBalancer`` as stored (``{}`` when it has none): what the
    Ingress directory reads of one (the status, to see another writer's late write)."""

    ingress: Ingress
    load_balancer: dict[str, Any]


def parse_stored_ingress(raw: dict[str, Any]) -> StoredIngress:
    """:func:`parse_ingress`, with the stored ``status.loadBalancer``."""
    status = raw.get("status")
    stored = status.get("loadBalancer") if isinstance(status, dict) else None
    return StoredIngress(parse_ingress(raw), stored if isinstance(stored, dict) else {})


def parse_ingress_class(raw: dict[str, Any]) -> IngressClass:
    """Parse a v1 IngressClass; raises :class:`InvalidObject` naming the class and the field."""
    return parse_object(IngressClass, "IngressClass", raw)


def is_ours(ingress: Ingress, classes: Iterable[IngressClass]) -> bool:
    """Whether interlock serves ``ingress``.

    It is ours when ``spec.ingressClassName`` names an IngressClass whose controller is
    ``interlock.dev/ingress-controller``; or, with no ``ingressClassName``, when the legacy
    ``kubernetes.io/ingress.class`` annotation names such a class; or, with neither, when one of
    our classes is marked as the cluster default. A class name that matches no IngressClass is
    not ours: another controller may be about to create it.
    """
    classes = list(classes)
    # An empty name is how some tools write "no class"; it can never name an IngressClass.
    named = ingress.spec.ingress_class_name or ingress.metadata.annotations.get(
        LEGACY_CLASS_ANNOTATION
    )
    if named:
        return any(c.metadata.name == named and c.is_ours for c in classes)
    return any(c.is_default and c.is_ours for c in classes)
