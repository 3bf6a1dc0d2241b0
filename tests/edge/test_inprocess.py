"""InProcessEdge as a provider: fail closed, keep the last good configuration, swap atomically."""

from __future__ import annotations

import asyncio
import json

import pytest

from interlock.edge.provider import (
    ApplyModules,
    EdgeSnapshot,
    PermanentEdgeError,
    TransientEdgeError,
)
from interlock.model.moduleset import Modules
from tests.kit.edge_routes import serve_route
from tests.kit.secrets_kit import BASIC_AUTH, JWT, PASSWORD, SECRETS, basic_header, bearer_header

from .conftest import BACKEND, HOST, Backend, EdgeHarness

BAD_CIDR = Modules.model_validate({"ipRestriction": {"allow": ["10.0.0.0/33"]}})


async def apply(
    harness: EdgeHarness, modules: Modules, *, route_id: str = "root", path: str = "/"
) -> None:
    await serve_route(
        harness.edge, host=HOST, route_id=route_id, path=path, modules=modules, secrets=SECRETS
    )


async def test_new_route_is_created_without_backend(harness: EdgeHarness, backend: Backend) -> None:
    await apply(harness, Modules())
    assert (await harness.get("/"))[0] == 503
    route = (await harness.edge.snapshot()).route(host=HOST, route_id="root")
    assert route is not None
    assert (route.applied, route.backend) == (True, None)
    assert backend.seen == []


async def test_failed_new_route_reserves_its_path_with_503(
    harness: EdgeHarness, backend: Backend
) -> None:
    await harness.serve(route_id="root", path="/")
    with pytest.raises(PermanentEdgeError, match=r"route admin: ipRestriction\.allow\[0\]"):
        await apply(harness, BAD_CIDR, route_id="admin", path="/admin")
    # Not served by the "/" route: the failed route holds its path, closed.
    assert (await harness.get("/admin/x"))[0] == 503
    with pytest.raises(PermanentEdgeError, match="never applied"):
        await harness.edge.attach_backend(host=HOST, route_id="admin", backend=BACKEND)
    assert (await harness.get("/admin/x"))[0] == 503
    assert backend.seen == []
    route = (await harness.edge.snapshot()).route(host=HOST, route_id="admin")
    assert route is not None
    assert (route.applied, route.backend) == (False, None)
    # Fixing the modules makes the route usable.
    await apply(harness, BASIC_AUTH, route_id="admin", path="/admin")
    await harness.edge.attach_backend(host=HOST, route_id="admin", backend=BACKEND)
    assert (await harness.get("/admin/x"))[0] == 401


async def test_failed_update_keeps_the_last_good_configuration(
    harness: EdgeHarness, backend: Backend
) -> None:
    await harness.serve(modules=None)
    await apply(harness, BASIC_AUTH)
    before = await harness.edge.snapshot()
    with pytest.raises(PermanentEdgeError):
        await apply(harness, BAD_CIDR)
    with pytest.raises(TransientEdgeError, match="'missing'"):
        await apply(
            harness,
            Modules.model_validate(
                {"basicAuth": {"realm": "x", "secretRef": {"name": "missing", "key": "htpasswd"}}}
            ),
        )
    assert await harness.edge.snapshot() == before
    assert (await harness.get("/"))[0] == 401
    assert (await harness.get("/", headers=basic_header()))[0] == 200


async def test_invalid_route_shape_is_permanent(harness: EdgeHarness) -> None:
    with pytest.raises(PermanentEdgeError, match="must start with"):
        await apply(harness, Modules(), path="relative")
    with pytest.raises(PermanentEdgeError, match="pathType"):
        await harness.edge.apply_modules(
            ApplyModules(
                host=HOST,
                route_id="r",
                path="/",
                path_type="Regex",  # type: ignore[arg-type]
                modules=Modules(),
            )
        )
    with pytest.raises(PermanentEdgeError, match="no such route"):
        await harness.edge.attach_backend(host=HOST, route_id="ghost", backend=BACKEND)


async def test_reapplying_the_same_modules_keeps_rate_limit_state(
    harness: EdgeHarness, backend: Backend
) -> None:
    limited = Modules.model_validate({"rateLimit": {"requests": 1, "period": "1h"}})
    await apply(harness, limited)
    await harness.edge.attach_backend(host=HOST, route_id="root", backend=BACKEND)
    assert (await harness.get("/"))[0] == 200
    await apply(harness, limited)
    assert (await harness.get("/"))[0] == 429


async def test_remove_route_and_host(harness: EdgeHarness, backend: Backend) -> None:
    await harness.serve(route_id="a", path="/a")
    await harness.serve(route_id="b", path="/b")
    await harness.edge.remove_route(host=HOST, route_id="a")
    assert (await harness.get("/a"))[0] == 404
    assert (await harness.get("/b"))[0] == 200
    await harness.edge.remove_route(host=HOST, route_id="b")
    await harness.edge.remove_route(host=HOST, route_id="b")
    assert (await harness.edge.snapshot()).hosts == ()


async def test_snapshot_is_json_and_free_of_secrets(harness: EdgeHarness) -> None:
    await apply(harness, BASIC_AUTH)
    await harness.edge.attach_backend(host=HOST, route_id="root", backend=BACKEND)
    snapshot = await harness.edge.snapshot()
    text = json.dumps(snapshot.to_json())
    assert EdgeSnapshot.from_json(json.loads(text)) == snapshot
    assert PASSWORD not in text
    assert "$2b$" not in text
    assert snapshot.to_json()["hosts"][0]["routes"][0]["backend"]["service"] == "web"


async def test_switching_basic_auth_to_jwt_never_admits_without_credentials(
    harness: EdgeHarness, backend: Backend
) -> None:
    """Hammer the route with unauthenticated requests while its auth kind flips."""
    await apply(harness, BASIC_AUTH)
    await harness.edge.attach_backend(host=HOST, route_id="root", backend=BACKEND)
    statuses: list[int] = []
    stop = asyncio.Event()
    answered = asyncio.Event()

    async def hammer() -> None:
        while not stop.is_set():
            statuses.append((await harness.get("/"))[0])
            answered.set()

    clients = [asyncio.create_task(hammer()) for _ in range(8)]
    try:
        for round_ in range(20):
            await apply(harness, JWT if round_ % 2 == 0 else BASIC_AUTH)
            seen = len(statuses)
            async with asyncio.timeout(60):
                while len(statuses) < seen + 8:
                    answered.clear()
                    await answered.wait()
    finally:
        stop.set()
        await asyncio.gather(*clients)
    assert len(statuses) >= 160
    assert set(statuses) == {401}
    assert backend.seen == []
    # And the credentials of the auth kind in force do work.
    assert (await harness.get("/", headers=basic_header()))[0] == 200
    await apply(harness, JWT)
    assert (await harness.get("/", headers=bearer_header()))[0] == 200
    assert (await harness.get("/", headers=basic_header()))[0] == 401
