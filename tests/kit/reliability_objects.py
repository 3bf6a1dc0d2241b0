"""The small cluster universe the convergence harness draws its histories from.

Every object has a fixed name and a handful of *variants* (valid, invalid, pointing elsewhere),
so a generated history of a few dozen steps still exercises the interesting meetings: a route
whose backend Service comes and goes, a cross-namespace backend whose ReferenceGrant comes and
goes, two Ingresses claiming one host and path, a ModuleSet that turns invalid under a route
already serving, a basicAuth Secret that is created after the Ingress that needs it.

Variants are plain functions of an index, so a failing example prints as a short list of
``(kind, name, variant)`` steps that a person can replay by hand.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import bcrypt

from tests.kit.edge_objects import ingress as edge_ingress

GATEWAY = "gateway.networking.k8s.io"
NAMESPACES = ("default", "other")
PLANTED_PASSWORD = "planted-pw-7Qx9"
"""A password the tests plant in Secrets; it must never appear in any output."""
PLANTED_SECRET_MARKER = "planted-secret-Zk3v"
"""A Secret value (webhook key) the tests plant; it must never appear in any output."""
HTPASSWD = "alice:" + bcrypt.hashpw(PLANTED_PASSWORD.encode(), bcrypt.gensalt(4)).decode()

Obj = dict[str, Any]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def service(name: str, variant: int, *, namespace: str = "default") -> Obj:
    """0: port 80; 1: ports 80 and 8080; 2: headless (no routes can attach through it)."""
    ports = [{"name": "http", "port": 80, "protocol": "TCP"}]
    if variant == 1:
        ports.append({"name": "admin", "port": 8080, "protocol": "TCP"})
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterIP": "None", "ports": ports} if variant == 2 else {"ports": ports},
    }


def endpoint_slice(name: str, variant: int) -> Obj:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{name}-slice",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": name},
        },
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": [f"10.1.0.{variant + 1}"], "conditions": {"ready": variant != 1}}
        ],
        "ports": [{"name": "http", "port": 8080 + variant, "protocol": "TCP"}],
    }


_BACKEND_CHOICES: tuple[tuple[dict[str, Any], ...], ...] = (
    ({"name": "svc-a", "port": 80, "weight": 1},),
    ({"name": "svc-b", "port": 80, "weight": 3}, {"name": "svc-a", "port": 80, "weight": 1}),
    ({"name": "svc-c", "namespace": "other", "port": 80, "weight": 1},),
    ({"name": "ghost", "port": 80, "weight": 1}, {"name": "svc-b", "port": 8080, "weight": 1}),
    ({"name": "svc-a", "port": 8080, "weight": 0},),
)


def http_route(name: str, variant: int) -> Obj:
    parent_name = ("svc-a", "svc-b", "svc-a", "svc-b", "ghost")[variant % 5]
    parent: dict[str, Any] = {"group": "core", "kind": "Service", "name": parent_name}
    if variant % 3 == 1:
        parent["port"] = 80
    backends = [dict(ref) for ref in _BACKEND_CHOICES[(variant * 7 + len(name)) % 5]]
    path = ("/", "/api", "/v2")[variant % 3]
    return {
        "apiVersion": f"{GATEWAY}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "parentRefs": [parent],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": path}}],
                    "backendRefs": backends,
                }
            ],
        },
    }


def reference_grant(name: str, variant: int) -> Obj:
    to: dict[str, Any] = {"group": "", "kind": "Service"}
    if variant == 1:
        to["name"] = "svc-c"
    if variant == 2:
        to["name"] = "someone-else"
    return {
        "apiVersion": f"{GATEWAY}/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": {"name": name, "namespace": "other"},
        "spec": {
            "from": [{"group": GATEWAY, "kind": "HTTPRoute", "namespace": "default"}],
            "to": [to],
        },
    }


_MODULE_VARIANTS: tuple[dict[str, Any], ...] = (
    {"headers": {"request": {"add": {"X-Team": "blue"}}}},
    {"ipRestriction": {"allow": ["10.0.0.0/8"], "deny": ["10.1.0.0/16"]}},
    {"ipRestriction": {"allow": ["10.0.0.0/33"]}},  # invalid: a permanent module error
    {"basicAuth": {"realm": "shop", "secretRef": {"name": "users", "key": "htpasswd"}}},
    {"compression": {"enabled": True}, "rateLimit": {"requests": 100, "period": "1m"}},
    {
        "webhookVerification": {"provider": "github", "secretRef": {"name": "hook", "key": "key"}},
        "headers": {"response": {"add": {"X-Frame-Options": "DENY"}}},
    },
)


def module_set(name: str, variant: int) -> Obj:
    return {
        "apiVersion": "interlock.dev/v1alpha1",
        "kind": "ModuleSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"modules": _MODULE_VARIANTS[variant % len(_MODULE_VARIANTS)]},
    }


def secret(name: str, variant: int) -> Obj:
    data = (
        {"htpasswd": _b64(HTPASSWD), "key": _b64(PLANTED_SECRET_MARKER)}
        if variant == 0
        else {"other": _b64(PLANTED_SECRET_MARKER)}  # the key the modules need is missing
    )
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "default"},
        "type": "Opaque",
        "data": data,
    }


def ingress(name: str, variant: int) -> Obj:
    host = ("h0.example", "h1.example", "h0.example", "h0.example")[variant % 4]
    path = ("/", "/", "/api", "/")[variant % 4]
    backend = ("svc-a", "svc-b", "ghost", "svc-a", "svc-b")[variant % 5]
    modules = ("", "ms-0", "ms-0,ms-1", "ms-1", "ms-1,ms-0")[(variant + len(name)) % 5]
    return edge_ingress(name, host, backend=backend, modules=modules, path=path)


INGRESS_CLASS: Obj = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "IngressClass",
    "metadata": {"name": "interlock"},
    "spec": {"controller": "interlock.dev/ingress-controller"},
}

UNIVERSE: dict[str, tuple[tuple[str, ...], int, Callable[[str, int], Obj]]] = {
    "Service": (("svc-a", "svc-b"), 3, service),
    "ServiceOther": (("svc-c",), 2, lambda name, v: service(name, v, namespace="other")),
    "EndpointSlice": (("svc-a", "svc-b"), 3, endpoint_slice),
    "HTTPRoute": (("r-0", "r-1", "r-2"), 15, http_route),
    "ReferenceGrant": (("grant",), 3, reference_grant),
    "Ingress": (("i-0", "i-1"), 20, ingress),
    "ModuleSet": (("ms-0", "ms-1"), len(_MODULE_VARIANTS), module_set),
    "Secret": (("users", "hook"), 2, secret),
}
"""kind → (names, number of variants, builder)."""


def build(kind: str, name: str, variant: int) -> Obj:
    _, count, builder = UNIVERSE[kind]
    return builder(name, variant % count)
