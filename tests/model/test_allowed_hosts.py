"""Which Host headers interlock's API servers answer (the DNS-rebinding guard's rule)."""

from __future__ import annotations

import pytest

from interlock.model.allowed_hosts import AllowedHosts, host_name

ALLOWED = AllowedHosts.parse(
    ["interlock-policy.interlock-system.svc", "*.interlock-system.svc.cluster.local"],
    flag="--allowed-host",
)


@pytest.mark.parametrize(
    "header",
    [
        None,  # HTTP/1.0: no browser sends that
        "127.0.0.1",
        "127.0.0.1:9090",
        "10.42.0.7:9090",  # kubelet probing the Pod IP
        "[::1]:8090",
        "[fd00::7]",
        "::1",
        "localhost",
        "LOCALHOST:9090",
        "app.localhost",
        "interlock-policy.interlock-system.svc:8090",
        "interlock-policy.interlock-system.svc.",
        "interlock-metrics.interlock-system.svc.cluster.local:9090",
    ],
)
def test_addresses_localhost_and_allowed_names_are_answered(header: str | None) -> None:
    assert ALLOWED.allows(header)


@pytest.mark.parametrize(
    "header",
    [
        "",
        "evil.example",
        "evil.example:9090",
        "127.0.0.1.evil.example",
        "localhost.evil.example",
        "interlock-policy.interlock-system.svc.evil.example",
        "evilinterlock-system.svc.cluster.local",
        "interlock-system.svc.cluster.local",  # the wildcard's suffix itself is not under it
        "interlock-policy",
        "[evil.example]",
    ],
)
def test_other_names_are_refused(header: str) -> None:
    assert not ALLOWED.allows(header)


def test_a_listening_name_is_allowed_and_addresses_need_nothing() -> None:
    assert AllowedHosts().with_listening("admin.internal").allows("admin.internal:9090")
    assert AllowedHosts().with_listening("0.0.0.0") == AllowedHosts()


@pytest.mark.parametrize("value", ["evil example", "*", "*.", "a..b", "http://x", "x:80"])
def test_a_bad_name_is_refused_naming_the_flag(value: str) -> None:
    with pytest.raises(ValueError, match=r"--allowed-host: .* is not a host name"):
        AllowedHosts.parse([value], flag="--allowed-host")


def test_host_name_drops_port_brackets_dot_and_case() -> None:
    assert host_name("[FD00::1]:80") == "fd00::1"
    assert host_name("Web.Example.:8080") == "web.example"
    assert host_name("10.0.0.1:80") == "10.0.0.1"
