"""Which Service port a mesh request's authority names (interlock.model.authority)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from interlock.model.authority import (
    MeshTarget,
    NotAService,
    connect_target,
    mesh_target,
    parse_authority,
    parse_namespace,
    validate_cluster_domain,
)
from interlock.model.service import ServicePortKey


@pytest.mark.parametrize(
    ("authority", "expected"),
    [
        ("web.shop.svc.cluster.local", ServicePortKey("shop", "web", 80)),
        ("web.shop.svc.cluster.local:8080", ServicePortKey("shop", "web", 8080)),
        ("web.shop.svc.cluster.local.", ServicePortKey("shop", "web", 80)),
        ("web.shop.svc.cluster.local.:81", ServicePortKey("shop", "web", 81)),
        ("web.shop.svc", ServicePortKey("shop", "web", 80)),
        ("web.shop.svc:9000", ServicePortKey("shop", "web", 9000)),
        ("web.shop", ServicePortKey("shop", "web", 80)),
        ("web.shop:1", ServicePortKey("shop", "web", 1)),
        ("web.shop:65535", ServicePortKey("shop", "web", 65535)),
        ("WEB.Shop.SVC.Cluster.Local", ServicePortKey("shop", "web", 80)),
        ("a-b.1ns.svc", ServicePortKey("1ns", "a-b", 80)),
    ],
)
def test_the_forms_kubernetes_dns_answers_name_a_service_port(
    authority: str, expected: ServicePortKey
) -> None:
    assert parse_authority(authority) == expected


@pytest.mark.parametrize(
    ("authority", "says"),
    [
        ("web", "names no Service"),
        ("", "names no Service"),
        ("web.shop.svc.example.org", "names no Service"),
        ("web.shop.svc.cluster", "names no Service"),
        ("web.shop.cluster.local", "names no Service"),
        ("a.web.shop.svc", "names no Service"),
        ("127.0.0.1:8080", "an IP address"),
        ("[::1]:80", "an IP address"),
        ("web.shop:0", "is not 1-65535"),
        ("web.shop:65536", "is not 1-65535"),
        ("web.shop:http", "is not 1-65535"),
        ("web.shop:", "is not 1-65535"),
        ("web.shop:+80", "is not 1-65535"),
        ("1web.shop", "is not a Service name"),
        ("web-.shop", "is not a Service name"),
        ("we_b.shop", "is not a Service name"),
        ("web.sh_op.svc", "is not a namespace name"),
        ("web." + "n" * 64, "is not a namespace name"),
    ],
)
def test_anything_else_names_no_service_and_says_why(authority: str, says: str) -> None:
    answer = parse_authority(authority)
    assert isinstance(answer, NotAService)
    assert says in answer.reason
    assert repr(authority[:20])[:-1] in answer.reason


def test_the_cluster_domain_is_configurable() -> None:
    domain = validate_cluster_domain(".Corp.Example.")
    assert domain == "corp.example"
    assert parse_authority("web.shop.svc.corp.example:81", cluster_domain=domain) == (
        ServicePortKey("shop", "web", 81)
    )
    refused = parse_authority("web.shop.svc.cluster.local", cluster_domain=domain)
    assert isinstance(refused, NotAService)
    assert "NAME.NAMESPACE.svc.corp.example" in refused.reason


@pytest.mark.parametrize("bad", ["", ".", "a..b", "-a.b", "a_b"])
def test_a_cluster_domain_that_is_not_dns_labels_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="--cluster-domain"):
        validate_cluster_domain(bad)


def test_the_client_namespace_must_be_a_namespace_name() -> None:
    assert parse_namespace("team-a", flag="--mesh-client-namespace") == "team-a"
    with pytest.raises(ValueError, match="--mesh-client-namespace: 'Team_A'"):
        parse_namespace("Team_A", flag="--mesh-client-namespace")


@pytest.mark.parametrize(
    ("target", "host", "expected"),
    [
        (
            "/x?a=1",
            "web.shop.svc:8080",
            MeshTarget(ServicePortKey("shop", "web", 8080), "/x?a=1"),
        ),
        (
            "http://web.shop.svc:8080/x?a=1",
            "ignored.other",
            MeshTarget(ServicePortKey("shop", "web", 8080), "/x?a=1"),
        ),
        ("http://web.shop", None, MeshTarget(ServicePortKey("shop", "web", 80), "/")),
        ("HTTP://web.shop?q", None, MeshTarget(ServicePortKey("shop", "web", 80), "/?q")),
    ],
)
def test_the_authority_comes_from_an_absolute_target_else_from_host(
    target: str, host: str | None, expected: MeshTarget
) -> None:
    assert mesh_target(target, host=host) == expected


@pytest.mark.parametrize(
    ("target", "host", "says"),
    [
        ("/x", None, "no Host header"),
        ("/x", "", "no Host header"),
        ("https://web.shop/x", None, "only http://"),
        ("http://user@web.shop/x", None, "user info"),
        ("*", "web.shop", "neither a path nor a URL"),
        ("web.shop:80", None, "neither a path nor a URL"),
    ],
)
def test_targets_that_name_no_service(target: str, host: str | None, says: str) -> None:
    answer = mesh_target(target, host=host).authority
    assert isinstance(answer, NotAService)
    assert says in answer.reason


_service = st.from_regex(r"\A[a-z]([-a-z0-9]{0,20}[a-z0-9])?\Z")
_namespace = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?\Z")
_suffix = st.sampled_from(["", ".svc", ".svc.cluster.local", ".svc.cluster.local."])


@given(
    name=_service,
    namespace=_namespace,
    suffix=_suffix,
    port=st.none() | st.integers(1, 65535),
    upper=st.booleans(),
    absolute=st.booleans(),
)
def test_every_dns_form_of_a_service_port_parses_back_to_it(
    name: str,
    namespace: str,
    suffix: str,
    port: int | None,
    upper: bool,
    absolute: bool,
) -> None:
    host = f"{name}.{namespace}{suffix}" + ("" if port is None else f":{port}")
    if upper:
        host = host.upper()
    expected = ServicePortKey(namespace=namespace, name=name, port=port or 80)
    if absolute:
        got = mesh_target(f"http://{host}/p", host="other.ns")
    else:
        got = mesh_target("/p", host=host)
    assert got == MeshTarget(expected, "/p")


@given(st.text(max_size=80))
def test_any_text_is_a_service_port_or_a_reason_never_an_error(text: str) -> None:
    answer = parse_authority(text)
    if isinstance(answer, ServicePortKey):
        assert 0 < answer.port <= 65535
        assert answer.name and answer.namespace
    else:
        assert answer.reason


def test_a_connect_target_needs_a_port() -> None:
    assert connect_target("db.shop.svc:5432") == ServicePortKey("shop", "db", 5432)
    refused = connect_target("db.shop.svc")
    assert isinstance(refused, NotAService)
    assert "needs a port" in refused.reason
    assert isinstance(connect_target("10.0.0.1:5432"), NotAService)
