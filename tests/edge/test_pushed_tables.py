"""``interlock edge --pushed-upstreams``: the admin API takes the controller's upstream tables,
the edge routes by them (no DNS), and a backend is attached only once its table arrived."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from interlock.dataplane.pushed_upstreams import PushedUpstreams
from interlock.edge.http_provider import HttpEdge, TableReplaced
from interlock.edge.provider import (
    ApplyModules,
    PermanentEdgeError,
    TransientEdgeError,
)
from interlock.edge.standalone import StandaloneEdge
from interlock.model.meta import ObjectKey
from interlock.model.moduleset import Modules, SecretValue
from interlock.model.upstream_table import (
    ServiceEndpoints,
    TableChanges,
    UpstreamTable,
    table_changes,
)
from tests.kit.grpc_policies import policy_of

from .conftest import BACKEND, HOST, Backend

TOKEN = SecretValue(b"edge-admin-token")
WEB = ObjectKey(namespace="default", name="web")
SERVICE = {"metadata": {"name": "web", "namespace": "default"}, "spec": {"ports": [{"port": 80}]}}


async def started(pushed: PushedUpstreams | None) -> tuple[StandaloneEdge, str, str]:
    standalone = StandaloneEdge(admin_token=TOKEN, pushed=pushed)
    addresses = await standalone.start(listen="127.0.0.1:0", admin="127.0.0.1:0")
    assert addresses.edge.http is not None
    edge = f"http://127.0.0.1:{addresses.edge.http[1]}"
    return standalone, edge, f"http://127.0.0.1:{addresses.admin[1]}"


@pytest.fixture
async def worker() -> AsyncIterator[tuple[PushedUpstreams, str, HttpEdge]]:
    pushed = PushedUpstreams()
    standalone, edge, admin = await started(pushed)
    client = HttpEdge(base_url=admin, token=TOKEN)
    yield pushed, edge, client
    await client.close()
    await standalone.stop()


def table(backend: Backend) -> UpstreamTable:
    rows = ServiceEndpoints(known=True, exists=True, ports=((80, (backend.address,)),))
    return UpstreamTable(policies={BACKEND.key: policy_of(SERVICE)}, services={WEB: rows})


async def status(edge: str) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(edge + "/", headers={"Host": HOST}) as response,
    ):
        return response.status, await response.text()


async def test_a_backend_waits_for_its_table_then_routes_by_it(
    worker: tuple[PushedUpstreams, str, HttpEdge], backend: Backend
) -> None:
    pushed, edge, client = worker
    await client.apply_modules(
        ApplyModules(host=HOST, route_id="r", path="/", path_type="Prefix", modules=Modules())
    )
    with pytest.raises(TransientEdgeError, match="upstream table has not been pushed yet"):
        await client.attach_backend(host=HOST, route_id="r", backend=BACKEND)
    assert (await status(edge))[0] == 503  # no backend: nothing forwarded

    epoch = await client.push_upstreams(table_changes(None, table(backend)))
    assert epoch == pushed.epoch
    await client.attach_backend(host=HOST, route_id="r", backend=BACKEND)
    assert (await status(edge))[0] == 200
    assert backend.seen

    # The endpoints leave: the answer the controller's edge gives (503, none ready).
    none_ready = ServiceEndpoints(known=True, exists=True, ports=((80, ()),))
    with pytest.raises(TableReplaced, match="412"):  # rows for another (older) table
        await client.push_upstreams(TableChanges(services=((WEB, none_ready),)), epoch="old")
    assert (await status(edge))[0] == 200
    await client.push_upstreams(TableChanges(services=((WEB, none_ready),)), epoch=epoch)
    code, text = await status(edge)
    assert code == 503 and text.startswith("no-ready-endpoints:")
    assert pushed.counts()["pushes"] == 2


async def test_a_bad_body_is_refused_and_changes_nothing(
    worker: tuple[PushedUpstreams, str, HttpEdge], backend: Backend
) -> None:
    pushed, _, client = worker
    await client.push_upstreams(table_changes(None, table(backend)))
    async with (
        aiohttp.ClientSession() as session,
        session.patch(
            str(client._base) + "/v1/upstreams",
            json={
                "epoch": pushed.epoch,
                "services": [{"namespace": "default", "name": "web", "known": "yes"}],
            },
            headers={"Authorization": "Bearer edge-admin-token"},
        ) as response,
    ):
        assert response.status == 400
        assert "services[0]" in (await response.json())["error"]
    assert pushed.addresses(BACKEND.key) == [backend.address]


async def test_tables_need_the_token_and_an_edge_that_takes_them() -> None:
    standalone, _, admin = await started(None)
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.put(admin + "/v1/upstreams", json={}) as response,
        ):
            assert response.status == 401
        async with HttpEdge(base_url=admin, token=TOKEN) as client:
            with pytest.raises(PermanentEdgeError, match="--pushed-upstreams"):
                await client.push_upstreams(TableChanges(replace=True))
    finally:
        await standalone.stop()
