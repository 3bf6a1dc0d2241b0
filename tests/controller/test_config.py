"""``interlock.config``: a config that cannot run cannot be built, and the refusal names the flag.

Each concern checks its own combinations and :class:`ControllerConfig` those that span two; the
messages are the ones ``interlock run`` prints (``tests/test_cli_run.py`` checks them through the
flags), so a test or an embedder building a config gets the same words.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from interlock.config import (
    Address,
    ClusterConfig,
    ControllerConfig,
    EdgeConfig,
    GatewayConfig,
    LeadershipConfig,
)
from interlock.model.meta import ObjectKey
from interlock.model.moduleset import SecretValue

LOCAL = Address("127.0.0.1", 0)
TOKEN = SecretValue(b"admin-token")
URL = "http://edge.ingress.svc:9091"
SHOP_EDGE = ObjectKey(namespace="shop", name="edge")


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: ClusterConfig(embedded=True, kubeconfig="kc"),
            "--embedded cannot be combined with --kubeconfig or --in-cluster",
        ),
        (
            lambda: ClusterConfig(embedded=True, in_cluster=True),
            "--embedded cannot be combined with --kubeconfig or --in-cluster",
        ),
        (
            lambda: LeadershipConfig(duration=5.0, renew_deadline=10.0),
            "--lease-duration (5s) must be longer than --lease-renew-deadline (10s), and that "
            "longer than --lease-retry-period (2s)",
        ),
        (
            lambda: LeadershipConfig(renew_deadline=2.0, retry_period=2.0),
            "--lease-duration (15s) must be longer than --lease-renew-deadline (2s), and that "
            "longer than --lease-retry-period (2s)",
        ),
        (
            lambda: LeadershipConfig(duration=1.0, renew_deadline=0.5, retry_period=0.0),
            "--lease-duration (1s) must be longer than",
        ),
        (lambda: LeadershipConfig(identity=""), "--lease-identity must not be empty"),
        (
            lambda: ClusterConfig(manifests=("a.yaml",)),
            "--manifests and --write-kubeconfig need --embedded",
        ),
        (
            lambda: ClusterConfig(write_kubeconfig="kc"),
            "--manifests and --write-kubeconfig need --embedded",
        ),
        (
            lambda: EdgeConfig(addr=LOCAL, admin_url=URL, admin_token=TOKEN),
            "--edge-admin-url cannot be combined with --edge-addr, --edge-tls-addr or "
            "--trusted-proxy",
        ),
        (
            lambda: EdgeConfig(tls_addr=LOCAL, admin_url=URL, admin_token=TOKEN),
            "--edge-admin-url cannot be combined with --edge-addr, --edge-tls-addr or "
            "--trusted-proxy",
        ),
        (
            lambda: EdgeConfig(trusted_proxies=("10.0.0.0/8",), admin_url=URL, admin_token=TOKEN),
            "--edge-admin-url cannot be combined with --edge-addr, --edge-tls-addr or "
            "--trusted-proxy",
        ),
        (
            lambda: EdgeConfig(admin_url=URL),
            "--edge-admin-url and --edge-admin-token-file go together",
        ),
        (
            lambda: EdgeConfig(addr=LOCAL, admin_token=TOKEN),
            "--edge-admin-url and --edge-admin-token-file go together",
        ),
        (lambda: EdgeConfig(addr=LOCAL, workers=0), "--edge-workers 0: at least 1 is required"),
        (
            lambda: EdgeConfig(admin_url=URL, admin_token=TOKEN, workers=2),
            "--edge-workers above 1 needs --edge-addr",
        ),
        (
            lambda: EdgeConfig(publish_service=SHOP_EDGE),
            "--publish-service needs --edge-addr or --edge-admin-url",
        ),
        (
            lambda: ControllerConfig(gateways=GatewayConfig(addresses=("127.0.0.2",))),
            "--gateway-addresses needs --edge-addr",
        ),
        (
            lambda: ControllerConfig(
                cluster=ClusterConfig(namespaces=("default",)),
                edge=EdgeConfig(addr=LOCAL, publish_service=SHOP_EDGE),
            ),
            "--publish-service shop/edge: its namespace is not watched; add --namespace shop",
        ),
    ],
)
def test_an_invalid_combination_is_refused_naming_its_flags(
    build: Callable[[], object], message: str
) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        build()


def test_the_combinations_that_run_are_built() -> None:
    remote = EdgeConfig(admin_url=URL, admin_token=TOKEN, publish_service=SHOP_EDGE)
    assert remote.runs and remote.addr is None
    served = ControllerConfig(
        cluster=ClusterConfig(namespaces=("shop",)),
        edge=EdgeConfig(addr=LOCAL, tls_addr=LOCAL, workers=2, publish_service=SHOP_EDGE),
        gateways=GatewayConfig(addresses=("127.0.0.2",)),
    )
    assert served.edge.runs and served.edge.workers == 2
    assert ClusterConfig(embedded=True, manifests=("a.yaml",), write_kubeconfig="kc").embedded
    assert not ControllerConfig().edge.runs


def test_the_admin_token_is_not_shown_by_the_config() -> None:
    shown = repr(ControllerConfig(edge=EdgeConfig(admin_url=URL, admin_token=TOKEN)))
    assert "admin-token" not in shown and "<redacted>" in shown
