"""The standalone data plane process entry point and its DNS upstreams."""

from __future__ import annotations

import asyncio
import re

import aiohttp
import pytest

from interlock.dataplane.upstreams import DnsUpstreams
from interlock.model.moduleset import SecretValue
from interlock.model.service import ServicePortKey


async def test_run_standalone_edge_prints_bound_addresses_and_serves(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from interlock.edge.standalone import run_standalone_edge

    token = "standalone-test-token"
    task = asyncio.create_task(
        run_standalone_edge(
            listen="127.0.0.1:0", admin="127.0.0.1:0", admin_token=SecretValue(token.encode())
        )
    )
    output = ""
    try:
        async with asyncio.timeout(60):
            while "admin API on" not in output:
                await asyncio.sleep(0.01)
                output += capsys.readouterr().out
        edge_url = re.search(r"edge listening on (http://\S+)", output)
        admin_url = re.search(r"edge admin API on (http://\S+)", output)
        assert edge_url is not None
        assert admin_url is not None
        async with aiohttp.ClientSession() as client:
            snapshot = admin_url.group(1) + "/v1/snapshot"
            async with client.get(snapshot) as response:
                assert response.status == 401
            bearer = {"Authorization": f"Bearer {token}"}
            async with client.get(snapshot, headers=bearer) as response:
                assert response.status == 200
                assert await response.json() == {"hosts": []}
            async with client.get(edge_url.group(1) + "/", headers={"Host": "x.test"}) as response:
                assert response.status == 404
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def test_dns_upstreams_name_the_service() -> None:
    assert DnsUpstreams().addresses(ServicePortKey("shop", "web", 8080)) == [("web.shop.svc", 8080)]
    assert DnsUpstreams(cluster_domain="cluster.local.").addresses(
        ServicePortKey("shop", "web", 80)
    ) == [("web.shop.svc.cluster.local", 80)]
    assert DnsUpstreams().policy(ServicePortKey("shop", "web", 80)) is None
