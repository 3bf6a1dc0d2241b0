"""The data plane's admin REST API: the provider calls, over HTTP, for a separate edge process.

When the data plane runs as its own process (``interlock edge``), the controller programs it
through :class:`~interlock.edge.http_provider.HttpEdge`, which calls this API. Every endpoint is
one provider call on the process's :class:`InProcessEdge`, with the same all-or-nothing meaning.
JSON in and out; the status code carries the error class, so the client need not parse prose:

- ``PUT /v1/hosts/{host}/routes/{route_id}/modules`` — ``{path, pathType, modules, secrets}``
- ``PUT /v1/hosts/{host}/routes/{route_id}/backend`` — ``{namespace, service, port, exists}``
- ``DELETE /v1/hosts/{host}/routes/{route_id}/backend``
- ``DELETE /v1/hosts/{host}/routes/{route_id}``
- ``PUT /v1/hosts/{host}/tls`` — ``{certPem, keyPem}`` (base64, or both null to remove)
- ``GET /v1/snapshot`` — the :class:`EdgeSnapshot` JSON
- ``GET /v1/instance`` — ``{instance}``: a name drawn when this API is made, so another one
  means the process restarted and holds nothing it was told (the controller polls it, then
  programs its routes and pushes its upstream tables again)
- ``GET /v1/worker`` — ``{pid, traffic, upstreams}``: this process, its request counters
  (:mod:`interlock.edge.worker_traffic`; what a controller with ``--edge-workers`` sums) and
  the rows of its pushed upstream tables (``null`` without ``--pushed-upstreams``)
- ``PUT /v1/upstreams`` (replace; answers ``{epoch}``) and ``PATCH /v1/upstreams`` (set and
  remove rows; the body's ``epoch`` must be the last ``PUT``'s, else 412: the edge restarted
  and needs the whole table) — the controller's upstream tables
  (:mod:`interlock.model.upstream_table`), for an edge started with ``--pushed-upstreams``; one
  started without answers 409. Such an edge attaches a backend only once its Service port's
  policy arrived (503 before: the controller pushes, then retries)

Path parameters are percent-encoded (a route id may contain ``/``). ``modules`` is the ModuleSet
``spec.modules`` form; ``secrets`` is ``[{"name", "key", "value"}]`` with ``value`` base64.
Answers: 204 done; 400 a body that cannot be read and 422 a permanent error (both
``{"error": message}``, not worth retrying); 503 a transient error, with ``Retry-After`` when the
provider suggested one. Secret values are decoded into :class:`SecretValue` at once and appear in
no answer and no log line.

Anyone who can call this API decides what the edge serves (a ``PUT`` of empty modules strips a
route's basicAuth), so every endpoint but ``/healthz`` needs ``Authorization: Bearer TOKEN``, the
token shared with the controller through a file (a mounted Secret: ``interlock edge
--admin-token-file``, ``interlock run --edge-admin-token-file``). It is compared in constant time;
a request without it, or with another, is answered 401 and changes nothing. The token is never
logged nor echoed. Before it, the ``Host`` must name this server (an IP address, localhost or a
name given with ``--allowed-host``; :mod:`interlock.model.allowed_hosts`, against DNS rebinding):
else 421.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import math
import os
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware
from pydantic import ValidationError

from interlock.dataplane.metrics import Traffic
from interlock.dataplane.pushed_upstreams import PushedUpstreams
from interlock.edge.inprocess import InProcessEdge
from interlock.edge.provider import (
    PATH_TYPES,
    ApplyModules,
    BackendTarget,
    PermanentEdgeError,
    TransientEdgeError,
)
from interlock.edge.worker_traffic import statistics_json
from interlock.model.allowed_hosts import AllowedHosts, refusal
from interlock.model.moduleset import Modules, SecretValue
from interlock.model.upstream_table import changes_from_json

EDGE_KEY: web.AppKey[InProcessEdge] = web.AppKey("edge", InProcessEdge)
TRAFFIC_KEY: web.AppKey[Traffic] = web.AppKey("traffic", Traffic)
UPSTREAMS_KEY: web.AppKey[PushedUpstreams | None] = web.AppKey("upstreams")
INSTANCE_KEY: web.AppKey[str] = web.AppKey("instance", str)


class BadRequest(ValueError):
    """The request body cannot be read; the message names the field."""


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


_UNAUTHENTICATED = ("/healthz",)
"""Paths served without the token: they reveal and change nothing."""


def _guard(token: SecretValue, allowed_hosts: AllowedHosts) -> Middleware:
    expected = b"Bearer " + token.reveal()

    @web.middleware
    async def authenticated(request: web.Request, handler: Handler) -> web.StreamResponse:
        host = request.headers.get("Host")
        if not allowed_hosts.allows(host):
            assert host is not None
            return web.json_response(
                {"error": refusal(host, flag="--allowed-host").strip()}, status=421
            )
        if request.path not in _UNAUTHENTICATED:
            given = request.headers.get("Authorization", "").encode("latin-1", "replace")
            if not hmac.compare_digest(given, expected):
                return web.json_response(
                    {
                        "error": "the edge admin API needs Authorization: Bearer with the token "
                        "of interlock edge --admin-token-file (interlock run "
                        "--edge-admin-token-file sends it)"
                    },
                    status=401,
                    headers={"WWW-Authenticate": 'Bearer realm="interlock edge admin"'},
                )
        return await handler(request)

    return authenticated


def admin_app(
    edge: InProcessEdge,
    *,
    token: SecretValue,
    allowed_hosts: AllowedHosts | None = None,
    traffic: Traffic | None = None,
    upstreams: PushedUpstreams | None = None,
) -> web.Application:
    """The admin API over ``edge`` as an aiohttp application; every call but ``/healthz`` must
    carry ``Authorization: Bearer`` and ``token``, and every call a ``Host`` that
    ``allowed_hosts`` allows (besides IP addresses and localhost). ``traffic``: the counters
    ``/v1/worker`` reports (none counted without it); ``upstreams``: the tables ``PUT`` and
    ``PATCH /v1/upstreams`` write (None: the edge resolves through DNS and refuses them)."""
    if not token.reveal():
        raise ValueError("the edge admin API token is empty")
    guard = _guard(token, allowed_hosts or AllowedHosts())
    app = web.Application(client_max_size=4 * 1024 * 1024, middlewares=[guard])
    app[EDGE_KEY] = edge
    app[TRAFFIC_KEY] = traffic if traffic is not None else Traffic()
    app[UPSTREAMS_KEY] = upstreams
    app[INSTANCE_KEY] = secrets.token_hex(8)
    route = "/v1/hosts/{host}/routes/{route_id}"
    app.router.add_put(route + "/modules", _errors(_put_modules))
    app.router.add_put(route + "/backend", _errors(_put_backend))
    app.router.add_delete(route + "/backend", _errors(_delete_backend))
    app.router.add_delete(route, _errors(_delete_route))
    app.router.add_put("/v1/hosts/{host}/tls", _errors(_put_tls))
    app.router.add_get("/v1/snapshot", _snapshot)
    app.router.add_get("/v1/worker", _worker)
    app.router.add_get("/v1/instance", _instance)
    app.router.add_put("/v1/upstreams", _errors(_put_upstreams))
    app.router.add_patch("/v1/upstreams", _errors(_put_upstreams))
    app.router.add_get("/healthz", _healthz)
    return app


def _errors(handler: Handler) -> Handler:
    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except BadRequest as exc:
            return web.json_response({"error": str(exc)}, status=400)
        except PermanentEdgeError as exc:
            return web.json_response({"error": exc.message}, status=422)
        except TransientEdgeError as exc:
            headers = {}
            if exc.retry_after is not None:
                headers["Retry-After"] = str(max(0, math.ceil(exc.retry_after)))
            return web.json_response({"error": exc.message}, status=503, headers=headers)

    return wrapped


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        data = await request.json()
    except ValueError:
        raise BadRequest("the body must be a JSON object") from None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    return data


def _decode_secret(value: object, *, field: str) -> SecretValue:
    if not isinstance(value, str):
        raise BadRequest(f"{field}: base64 text is required")
    try:
        return SecretValue(base64.b64decode(value, validate=True))
    except (binascii.Error, ValueError):
        raise BadRequest(f"{field}: not valid base64") from None


async def _put_modules(request: web.Request) -> web.StreamResponse:
    body = await _body(request)
    path, path_type = body.get("path"), body.get("pathType")
    if not isinstance(path, str):
        raise BadRequest("path: a string is required")
    if path_type not in PATH_TYPES:
        raise BadRequest(f"pathType: one of {', '.join(PATH_TYPES)} is required")
    try:
        modules = Modules.model_validate(body.get("modules") or {})
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        raise PermanentEdgeError(f"modules.{where}: {first['msg']}") from None
    raw_secrets = body.get("secrets") or []
    if not isinstance(raw_secrets, list):
        raise BadRequest("secrets: a list is required")
    secrets: dict[tuple[str, str], SecretValue] = {}
    for index, item in enumerate(raw_secrets):
        field = f"secrets[{index}]"
        if not isinstance(item, dict) or not all(
            isinstance(item.get(k), str) for k in ("name", "key")
        ):
            raise BadRequest(f"{field}: name and key strings are required")
        secrets[(item["name"], item["key"])] = _decode_secret(
            item.get("value"), field=f"{field}.value"
        )
    await request.app[EDGE_KEY].apply_modules(
        ApplyModules(
            host=request.match_info["host"],
            route_id=request.match_info["route_id"],
            path=path,
            path_type=path_type,
            modules=modules,
            secrets=secrets,
        )
    )
    return web.Response(status=204)


async def _put_backend(request: web.Request) -> web.StreamResponse:
    body = await _body(request)
    try:
        backend = BackendTarget.from_json(body)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    upstreams = request.app[UPSTREAMS_KEY]
    if upstreams is not None and backend.exists and not upstreams.has_policy(backend.key):
        raise TransientEdgeError(
            f"{backend.key.describe()}: its upstream table has not been pushed yet "
            "(PUT /v1/upstreams first)"
        )
    await request.app[EDGE_KEY].attach_backend(
        host=request.match_info["host"], route_id=request.match_info["route_id"], backend=backend
    )
    return web.Response(status=204)


async def _delete_backend(request: web.Request) -> web.StreamResponse:
    await request.app[EDGE_KEY].detach_backend(
        host=request.match_info["host"], route_id=request.match_info["route_id"]
    )
    return web.Response(status=204)


async def _delete_route(request: web.Request) -> web.StreamResponse:
    await request.app[EDGE_KEY].remove_route(
        host=request.match_info["host"], route_id=request.match_info["route_id"]
    )
    return web.Response(status=204)


async def _put_tls(request: web.Request) -> web.StreamResponse:
    body = await _body(request)
    cert, key = body.get("certPem"), body.get("keyPem")
    await request.app[EDGE_KEY].set_tls(
        host=request.match_info["host"],
        cert_pem=None if cert is None else _decode_secret(cert, field="certPem"),
        key_pem=None if key is None else _decode_secret(key, field="keyPem"),
    )
    return web.Response(status=204)


async def _snapshot(request: web.Request) -> web.StreamResponse:
    return web.json_response(request.app[EDGE_KEY].snapshot_now().to_json())


async def _instance(request: web.Request) -> web.StreamResponse:
    return web.json_response({"instance": request.app[INSTANCE_KEY]})


async def _worker(request: web.Request) -> web.StreamResponse:
    stats = request.app[TRAFFIC_KEY].statistics()
    upstreams = request.app[UPSTREAMS_KEY]
    return web.json_response(
        {
            "pid": os.getpid(),
            "traffic": statistics_json(stats),
            "upstreams": None if upstreams is None else upstreams.counts(),
        }
    )


async def _put_upstreams(request: web.Request) -> web.StreamResponse:
    upstreams = request.app[UPSTREAMS_KEY]
    if upstreams is None:
        return web.json_response(
            {
                "error": "this edge resolves backends through cluster DNS; start it with "
                "--pushed-upstreams to take the controller's upstream tables"
            },
            status=409,
        )
    body = await _body(request)
    replace = request.method == "PUT"
    if not replace and body.get("epoch") != upstreams.epoch:
        return web.json_response(
            {
                "error": "these rows change another table than this edge holds (it restarted): "
                "PUT the whole table"
            },
            status=412,
        )
    try:
        changes = changes_from_json(body, replace=replace)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    upstreams.apply(changes)
    return web.json_response({"epoch": upstreams.epoch})


async def _healthz(request: web.Request) -> web.StreamResponse:
    return web.Response(text="ok\n")
