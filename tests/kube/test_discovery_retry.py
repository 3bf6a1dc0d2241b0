"""API discovery at start goes through a busy API server, and stops at once when it must.

A controller whose start fails on one 429 or 503 from an API server that is rolling out cannot
be deployed reliably; one that retries a 403 for a minute hides a broken ClusterRole. Time is a
fake clock advanced by the fake sleep, so the deadline and Retry-After are checked without
waiting.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from interlock.config import (
    Address,
    AdminConfig,
    ClusterConfig,
    ControllerConfig,
    EdgeConfig,
    LeadershipConfig,
    PolicyApiConfig,
)
from interlock.controller.app import Controller
from interlock.kube.client import make_api_client
from interlock.kube.discovery import DiscoveryError, DiscoveryRetry, is_served, served_resource
from interlock.kube.resources import HTTP_ROUTE, HTTP_ROUTE_VERSIONS, INGRESS, Resource
from interlock.mailbox.backoff import BackoffPolicy
from tests.kit.log_capture import captured_logs

BACKOFF = BackoffPolicy(initial=0.5, maximum=4.0)


class FakeTime:
    """A clock that only moves when the code under test sleeps; records every sleep."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def retry_with(fake: FakeTime, *, deadline: float = 60.0, seed: int = 7) -> DiscoveryRetry:
    return DiscoveryRetry(
        backoff=BACKOFF,
        deadline=deadline,
        rng=random.Random(seed),
        clock=fake.clock,
        sleep=fake.sleep,
    )


@pytest.fixture
def warnings() -> Iterator[list[str]]:
    with captured_logs("WARNING") as lines:
        yield lines


async def test_a_429_is_retried_no_sooner_than_retry_after(
    api: Any, server: Any, warnings: list[str]
) -> None:
    server.faults.fail_next(1, 429, path_contains="/apis/gateway.networking.k8s.io", retry_after=3)
    fake = FakeTime()
    found = await served_resource(api, HTTP_ROUTE_VERSIONS, retry=retry_with(fake))
    assert found == HTTP_ROUTE_VERSIONS[0]
    assert len(fake.sleeps) == 1 and fake.sleeps[0] >= 3.0
    assert server.faults.pending() == 0
    assert any("discover gateway.networking.k8s.io/v1: 429" in line for line in warnings)


async def test_5xx_answers_are_retried_with_the_backoff_policy_and_jitter(
    api: Any, server: Any, warnings: list[str]
) -> None:
    server.faults.fail_next(3, 503, path_contains="/apis/gateway.networking.k8s.io")
    fake = FakeTime()
    assert await is_served(api, HTTP_ROUTE, retry=retry_with(fake, seed=11))
    rng = random.Random(11)
    assert fake.sleeps == [BACKOFF.delay(attempt, rng) for attempt in range(3)]
    assert fake.sleeps[0] < fake.sleeps[1] < fake.sleeps[2]
    retried = [line for line in warnings if "retrying in" in line]
    assert [line.split("(attempt ")[1][0] for line in retried] == ["1", "2", "3"]


async def test_a_server_that_stays_busy_fails_at_the_deadline_naming_the_request(
    api: Any, server: Any
) -> None:
    server.faults.fail_next(1000, 500, path_contains="/apis/gateway.networking.k8s.io")
    fake = FakeTime()
    with pytest.raises(DiscoveryError) as failed:
        await is_served(api, HTTP_ROUTE, retry=retry_with(fake, deadline=10.0))
    assert sum(fake.sleeps) <= 10.0
    assert len(fake.sleeps) >= 3
    message = str(failed.value)
    assert "discover gateway.networking.k8s.io/v1: 500" in message
    assert "still failing after" in message
    # Retrying already happened: a caller's own retry loop must not start another round.
    assert not failed.value.retryable


@pytest.mark.parametrize("code", [401, 403])
async def test_a_permission_error_fails_at_once_saying_what_to_check(
    api: Any, server: Any, code: int
) -> None:
    server.faults.fail_next(1, code, path_contains="/apis/gateway.networking.k8s.io")
    fake = FakeTime()
    with pytest.raises(DiscoveryError) as failed:
        await served_resource(api, HTTP_ROUTE_VERSIONS, retry=retry_with(fake))
    assert fake.sleeps == []
    assert f"discover gateway.networking.k8s.io/v1: {code}" in str(failed.value)
    assert "credentials" in str(failed.value)


async def test_a_version_that_is_not_served_is_no_error(api: Any, server: Any) -> None:
    fake = FakeTime()
    unknown = Resource("example.com", "v9", "widgets", "Widget", namespaced=True)
    assert await served_resource(api, [unknown], retry=retry_with(fake)) is None
    assert fake.sleeps == []


async def test_no_connection_is_retried_until_the_deadline(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens on ``port`` any more: every request is refused.
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {}}]\n"
    )
    api = await make_api_client(kubeconfig=str(kubeconfig), in_cluster=False)
    try:
        fake = FakeTime()
        with pytest.raises(DiscoveryError) as failed:
            await is_served(api, INGRESS, retry=retry_with(fake, deadline=5.0))
        assert failed.value.code == 0
        assert len(fake.sleeps) >= 2
    finally:
        await api.close()


async def test_the_controller_starts_through_a_failed_edge_discovery(
    server: Any, tmp_path: Path
) -> None:
    """The edge half's discovery (Ingress, EndpointSlice …) goes through a 503 and a 429."""
    server.faults.fail_next(1, 503, path_contains="/apis/networking.k8s.io")
    server.faults.fail_next(1, 429, path_contains="/apis/discovery.k8s.io")
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
    local = Address(host="127.0.0.1", port=0)
    controller = Controller(
        ControllerConfig(
            cluster=ClusterConfig(kubeconfig=kubeconfig),
            policy=PolicyApiConfig(addr=local),
            admin=AdminConfig(addr=local),
            edge=EdgeConfig(addr=local),
            leadership=LeadershipConfig(namespace="default", identity="discovery-retry"),
        )
    )
    try:
        await controller.start()
        await controller.wait_ready(within=60.0)
        assert server.faults.pending() == 0
        assert controller.edge is not None
    finally:
        await controller.stop()
