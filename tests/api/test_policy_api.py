"""The policy API's HTTP contract, against a source whose policies the test controls."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import aiohttp
import pytest
from jsonschema import Draft202012Validator

from interlock.api.policy import build_policy_app
from interlock.api.policy_schema import OUTBOUND_POLICY_SCHEMA, SCHEMA_PATH
from interlock.api.serving import RunningSite, serve
from interlock.config import Address
from interlock.mailbox.testing import eventually as _eventually
from interlock.model.policy_watch import PolicyUpdate, WatchTarget
from interlock.model.service import ServicePortKey
from tests.kit.policy_sources import ControlledSource


class JsonSource(ControlledSource):
    """Policies given as the JSON documents the HTTP API serves."""

    def set(self, target: WatchTarget, policy: dict[str, object]) -> None:
        self.put(target, PolicyUpdate(policy=policy, body=json.dumps(policy).encode()))


WEB = WatchTarget(ServicePortKey("default", "web", 80), client_namespace="default")


@pytest.fixture
def source() -> JsonSource:
    return JsonSource()


@pytest.fixture
async def site(source: JsonSource) -> AsyncIterator[RunningSite]:
    running = await serve(
        build_policy_app(source=source, first_policy_timeout=0.5),
        Address(host="127.0.0.1", port=0),
    )
    yield running
    await running.stop()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        yield session


async def wait_for(condition: object, *, within: float = 60.0) -> None:
    assert callable(condition)
    await _eventually(condition, within=within)


async def test_get_returns_the_current_policy(site, source, http):
    source.set(WEB, {"service": "web", "v": 1})
    async with http.get(f"{site.url}/v1/outbound/default/web/80") as response:
        assert response.status == 200
        assert response.content_type == "application/json"
        assert await response.json() == {"service": "web", "v": 1}
    assert source.readers(WEB) == 0


async def test_client_namespace_defaults_to_the_service_namespace_and_can_be_set(
    site, source, http
):
    other = WatchTarget(ServicePortKey("default", "web", 80), client_namespace="shop")
    source.set(WEB, {"client": "default"})
    source.set(other, {"client": "shop"})
    async with http.get(f"{site.url}/v1/outbound/default/web/80?clientNamespace=shop") as r:
        assert await r.json() == {"client": "shop"}
    async with http.get(f"{site.url}/v1/outbound/default/web/80") as r:
        assert await r.json() == {"client": "default"}


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("/v1/outbound/default/web/0", "port '0'"),
        ("/v1/outbound/default/web/http", "port 'http'"),
        ("/v1/outbound/default/web/70000", "port '70000'"),
        ("/v1/outbound/Default/web/80", "namespace 'Default'"),
        ("/v1/outbound/default/web_1/80", "service 'web_1'"),
        ("/v1/outbound/default/web/80?clientNamespace=a.b", "clientNamespace 'a.b'"),
    ],
)
async def test_bad_requests_are_400_naming_the_wrong_part(site, http, path, fragment):
    async with http.get(site.url + path) as response:
        assert response.status == 400
        assert fragment in (await response.json())["error"]


async def test_no_policy_in_time_is_503_and_the_reader_is_released(site, source, http):
    async with http.get(f"{site.url}/v1/outbound/default/web/80") as response:
        assert response.status == 503
    assert source.readers(WEB) == 0


async def test_watch_streams_current_policy_then_each_change(site, source, http):
    source.set(WEB, {"v": 1})
    async with http.get(f"{site.url}/v1/outbound/default/web/80?watch=true") as response:
        assert response.status == 200
        assert response.content_type == "application/x-ndjson"
        assert json.loads(await response.content.readline()) == {"v": 1}
        source.set(WEB, {"v": 2})
        assert json.loads(await response.content.readline()) == {"v": 2}
        source.set(WEB, {"v": 3})
        assert json.loads(await response.content.readline()) == {"v": 3}


async def test_a_slow_reader_coalesces_to_the_latest_policy(site, source, http):
    source.set(WEB, {"v": 0})
    async with http.get(f"{site.url}/v1/outbound/default/web/80?watch=true") as response:
        assert json.loads(await response.content.readline()) == {"v": 0}
        await wait_for(lambda: source.readers(WEB) == 1)
        slot = source.open[WEB][0]
        # The handler is parked waiting on the slot; a burst lands before it runs again.
        for v in range(1, 101):
            source.set(WEB, {"v": v})
        seen = [json.loads(await response.content.readline())]
        assert seen == [{"v": 100}]
        assert slot.version == 101


async def test_open_watch_streams_hold_no_task_each(site, source, http):
    # Thousands of proxies hold a stream each: a stream is a protocol and a slot callback, not
    # an HTTP server's handler tasks (interlock/api/policy_stream.py).
    source.set(WEB, {"v": 1})
    tasks_before = len(asyncio.all_tasks())
    responses = [
        await http.get(f"{site.url}/v1/outbound/default/web/80?watch=true") for _ in range(20)
    ]
    try:
        for response in responses:
            assert json.loads(await response.content.readline()) == {"v": 1}
        assert source.readers(WEB) == 20
        assert len(asyncio.all_tasks()) == tasks_before
        source.set(WEB, {"v": 2})
        for response in responses:
            assert json.loads(await response.content.readline()) == {"v": 2}
    finally:
        for response in responses:
            response.close()
    await wait_for(lambda: source.readers(WEB) == 0)


async def test_a_watch_that_must_wait_for_its_first_policy_still_gets_it(source, http):
    running = await serve(
        build_policy_app(source=source, first_policy_timeout=60), Address("127.0.0.1", 0)
    )
    try:
        request = asyncio.create_task(
            http.get(f"{running.url}/v1/outbound/default/web/80?watch=true")
        )
        await wait_for(lambda: source.readers(WEB) == 1)
        source.set(WEB, {"v": 1})
        async with await request as response:
            assert response.status == 200
            assert json.loads(await response.content.readline()) == {"v": 1}
            source.set(WEB, {"v": 2})
            assert json.loads(await response.content.readline()) == {"v": 2}
    finally:
        await running.stop()


async def test_closing_the_watch_connection_releases_the_reader(site, source, http):
    source.set(WEB, {"v": 1})
    response = await http.get(f"{site.url}/v1/outbound/default/web/80?watch=true")
    await response.content.readline()
    assert source.readers(WEB) == 1
    response.close()
    await wait_for(lambda: source.readers(WEB) == 0)


async def test_stopping_the_server_ends_open_watches(source, http):
    running = await serve(build_policy_app(source=source), Address(host="127.0.0.1", port=0))
    source.set(WEB, {"v": 1})
    response = await http.get(f"{running.url}/v1/outbound/default/web/80?watch=true")
    await response.content.readline()
    await running.stop()
    assert source.readers(WEB) == 0
    response.close()


async def test_serve_reports_the_port_it_bound():
    running = await serve(build_policy_app(source=JsonSource()), Address("127.0.0.1", 0))
    try:
        assert running.address.port != 0
        assert running.url == f"http://127.0.0.1:{running.address.port}"
    finally:
        await running.stop()


async def test_requests_wait_for_the_initial_sync_then_503_if_it_does_not_come(source, http):
    synced = asyncio.Event()
    source.set(WEB, {"v": 1})
    running = await serve(
        build_policy_app(source=source, first_policy_timeout=0.3, wait_ready=synced.wait),
        Address("127.0.0.1", 0),
    )
    try:
        async with http.get(f"{running.url}/v1/outbound/default/web/80") as response:
            assert response.status == 503
            assert "initial sync" in (await response.json())["error"]
        request = asyncio.create_task(http.get(f"{running.url}/v1/outbound/default/web/80"))
        await asyncio.sleep(0.05)
        assert not request.done()
        synced.set()
        response = await asyncio.wait_for(request, 60)
        assert response.status == 200
        assert await response.json() == {"v": 1}
        response.release()
    finally:
        await running.stop()


async def test_the_json_schema_of_the_policy_is_served(
    site: RunningSite, http: aiohttp.ClientSession
) -> None:
    async with http.get(site.url + SCHEMA_PATH) as response:
        assert response.status == 200
        assert response.content_type == "application/schema+json"
        served = await response.json(content_type=None)
    assert served == OUTBOUND_POLICY_SCHEMA
    Draft202012Validator.check_schema(served)
