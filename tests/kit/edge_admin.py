"""The ``interlock edge`` admin API in the security tests of a standalone edge: the controller's
side (``HttpEdge`` with the token) guards a route with basicAuth, and the body an attacker
``PUT``s to strip that guard."""

from __future__ import annotations

import json

from interlock.edge.http_provider import HttpEdge
from interlock.edge.provider import ApplyModules, BackendTarget
from interlock.model.moduleset import SecretValue
from interlock.model.service import ServicePortKey
from tests.kit.secrets_kit import BASIC_AUTH, SECRETS

ROUTE = "Prefix:/"
"""The route :func:`guard_with_basic_auth` programs (``/``, a prefix)."""

STRIPPED = json.dumps({"path": "/", "pathType": "Prefix", "modules": {}, "secrets": []}).encode()
"""A ``PUT .../modules`` body that would leave :data:`ROUTE` unguarded."""


async def guard_with_basic_auth(admin_url: str, token: str, host: str) -> None:
    """Program ``host``'s :data:`ROUTE` through the admin API at ``admin_url``, as the controller
    does: basicAuth (``alice``, ``secrets_kit.PASSWORD``), then the backend ``default/web:80``."""
    async with HttpEdge(base_url=admin_url, token=SecretValue(token.encode())) as controller:
        await controller.apply_modules(
            ApplyModules(
                host=host,
                route_id=ROUTE,
                path="/",
                path_type="Prefix",
                modules=BASIC_AUTH,
                secrets={("users", "htpasswd"): SECRETS[("users", "htpasswd")]},
            )
        )
        await controller.attach_backend(
            host=host, route_id=ROUTE, backend=BackendTarget(ServicePortKey("default", "web", 80))
        )
