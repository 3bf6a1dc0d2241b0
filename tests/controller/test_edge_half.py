"""``EdgeHalf``, the controller's edge half, built without a cluster: what it shows of a data
plane programmed in another process (``--edge-admin-url``) names the host and never the
credentials, and it is not built for a config without an edge."""

from __future__ import annotations

import json

import pytest

from interlock.actors.service_port_watch import ServicePortWatches
from interlock.api.policy_json import policy_body
from interlock.config import ControllerConfig, EdgeConfig
from interlock.controller.edge_half import EdgeHalf
from interlock.controller.upstreams import SharedUpstreamCache
from interlock.mailbox import ActorSystem
from interlock.model.moduleset import SecretValue

ADMIN_TOKEN = SecretValue(b"remote-edge-admin-token")


def edge_half(config: ControllerConfig) -> EdgeHalf:
    system = ActorSystem()
    watches = ServicePortWatches(system, grace=0.1, encode=policy_body)
    return EdgeHalf(
        config=config,
        system=system,
        watches=watches,
        upstream_cache=SharedUpstreamCache(system),
    )


async def test_the_admin_url_password_is_never_shown() -> None:
    edge = edge_half(
        ControllerConfig(
            edge=EdgeConfig(
                admin_url="http://ops:hunter2@edge.ingress.svc:9091", admin_token=ADMIN_TOKEN
            )
        )
    )
    shown = json.dumps(edge.debug()) + "\n".join(edge.describe())
    assert "http://edge.ingress.svc:9091" in shown and "hunter2" not in shown
    assert "remote-edge-admin-token" not in shown
    await edge.stop()


def test_there_is_no_edge_half_without_an_edge() -> None:
    with pytest.raises(ValueError, match=r"config\.edge\.addr or config\.edge\.admin_url"):
        edge_half(ControllerConfig())
