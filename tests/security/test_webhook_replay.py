"""GitHub webhook replay protection: a captured delivery, sent again, verifies again (GitHub
signs no timestamp). With ``replayWindow`` the edge refuses an ``X-GitHub-Delivery`` id it
already accepted within the window; without it (the default) it does not."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from interlock.edge.provider import BackendTarget
from interlock.model.moduleset import Modules, SecretValue, parse_module_set
from interlock.model.service import ServicePortKey
from tests.kit.edge_routes import serve_route
from tests.kit.raw_http1 import send_raw

from .conftest import CountingBackend, Edge, running_edge

HOST = "hooks.example.com"
KEY = b"github-webhook-secret"
BODY = b'{"action":"opened","number":1}'


def _delivery(delivery_id: str | None, *, body: bytes = BODY) -> bytes:
    signature = hmac.new(KEY, body, hashlib.sha256).hexdigest()
    lines = [
        "POST /hook HTTP/1.1",
        f"Host: {HOST}",
        "Connection: close",
        f"X-Hub-Signature-256: sha256={signature}",
        f"Content-Length: {len(body)}",
    ]
    if delivery_id is not None:
        lines.append(f"X-GitHub-Delivery: {delivery_id}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def _serve(edge: Edge, backend: CountingBackend, *, replay_window: str | None) -> None:
    config: dict[str, object] = {
        "provider": "github",
        "secretRef": {"name": "hook", "key": "secret"},
    }
    if replay_window is not None:
        config["replayWindow"] = replay_window
    edge.upstreams.set(namespace="default", service="hook", port=80, addresses=[backend.address])
    await serve_route(
        edge.edge,
        host=HOST,
        modules=Modules.model_validate({"webhookVerification": config}),
        secrets={("hook", "secret"): SecretValue(KEY)},
        backend=BackendTarget(ServicePortKey("default", "hook", 80)),
    )


async def test_a_replayed_delivery_is_refused_within_the_window(
    counting_backends: tuple[CountingBackend, CountingBackend],
) -> None:
    backend, _ = counting_backends
    async with running_edge() as edge:
        await _serve(edge, backend, replay_window="5m")
        delivery = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
        assert (await send_raw(edge.address, _delivery(delivery))).status == 200
        replayed = await send_raw(edge.address, _delivery(delivery))
        assert replayed.status == 409
        assert (await send_raw(edge.address, _delivery("another-delivery"))).status == 200
        assert (await send_raw(edge.address, _delivery(None))).status == 401
        # A forged delivery is refused for its signature and never remembered.
        forged = _delivery("forged").replace(b'"number":1', b'"number":2')
        assert (await send_raw(edge.address, forged)).status == 401
        assert (await send_raw(edge.address, _delivery("forged"))).status == 200
    assert backend.finished == 3


async def test_replay_protection_is_off_by_default(
    counting_backends: tuple[CountingBackend, CountingBackend],
) -> None:
    backend, _ = counting_backends
    async with running_edge() as edge:
        await _serve(edge, backend, replay_window=None)
        for _ in range(2):
            assert (await send_raw(edge.address, _delivery("same"))).status == 200
    assert backend.finished == 2


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        ({"provider": "stripe", "replayWindow": "5m"}, "github only"),
        ({"provider": "github", "replayWindow": "0s"}, "longer than zero"),
    ],
)
def test_replay_window_is_validated_naming_the_field(
    config: dict[str, object], reason: str
) -> None:
    module_set = parse_module_set(
        {
            "apiVersion": "interlock.dev/v1alpha1",
            "kind": "ModuleSet",
            "metadata": {"name": "hooks", "namespace": "default"},
            "spec": {
                "modules": {
                    "webhookVerification": {
                        **config,
                        "secretRef": {"name": "hook", "key": "secret"},
                    }
                }
            },
        }
    )
    problems = [str(problem) for problem in module_set.problems]
    assert any("webhookVerification.replayWindow" in p and reason in p for p in problems), problems
