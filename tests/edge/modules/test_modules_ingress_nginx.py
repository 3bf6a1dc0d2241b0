"""The ingressNginx module per request: what ingress-nginx's annotations do at the edge."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from multidict import CIMultiDict

from interlock.dataplane.plan import Deadlines
from interlock.edge.modules import RequestView, compile_modules
from interlock.edge.modules.ingress_nginx import IngressNginx, holding
from interlock.edge.provider import BackendTarget
from interlock.model.ingress_nginx import IngressNginxModule
from interlock.model.module_settings import ModuleSettings, module_settings
from interlock.model.moduleset import Modules
from interlock.model.service import ServicePortKey

MAIN = BackendTarget(ServicePortKey("shop", "web", 80))


def module(*, rng: Callable[[], float] = lambda: 0.5, **config: Any) -> IngressNginx:
    modules = Modules(ingressNginx=IngressNginxModule.model_validate(config))
    settings = module_settings(modules)
    assert isinstance(settings, ModuleSettings) and settings.ingress_nginx is not None
    return IngressNginx(settings.ingress_nginx, rng=rng)


def view(path: str = "/", **fields: Any) -> RequestView:
    return RequestView(method=fields.pop("method", "GET"), path=path, **fields)


def test_rewrite_target_substitutes_the_groups_of_the_path_pattern() -> None:
    nginx = module(pathPattern="/something(/|$)(.*)", rewriteTarget="/$2")
    assert nginx.forward_path("/something", "/something") == "/"
    assert nginx.forward_path("/something/new", "/something/new") == "/new"
    assert nginx.forward_path("/something/a b", "/something/a%20b") == "/a%20b"
    assert module(rewriteTarget="/").forward_path("/x/y", "/x/y") == "/"
    assert module().forward_path("/x", "/x") == "/x"


def test_a_path_the_pattern_does_not_match_is_not_found() -> None:
    nginx = module(pathPattern="/api/v[0-9]+/(.*)")
    assert nginx.admit(view("/api/v2/users"), client="1.2.3.4") is None
    assert nginx.admit(view("/API/V2/users"), client="1.2.3.4") is None  # case-insensitive
    refused = nginx.admit(view("/api/latest/x"), client="1.2.3.4")
    assert refused is not None and refused.status == 404


def test_redirects() -> None:
    ssl = module(sslRedirect=True).admit(
        view("/a", scheme="http", authority="shop.example:8080", raw_target="/a?b=1"), client="c"
    )
    assert ssl is not None and (ssl.status, ssl.headers["Location"]) == (
        308,
        "https://shop.example/a?b=1",
    )
    assert module(sslRedirect=True).admit(view("/a", scheme="https"), client="c") is None
    moved = module(redirect="https://www.google.com", redirectStatus=308).admit(view(), client="c")
    assert moved is not None and (moved.status, moved.headers["Location"]) == (
        308,
        "https://www.google.com",
    )
    root = module(appRoot="/app1")
    found = root.admit(view("/", authority="approot.bar.com"), client="c")
    assert found is not None and found.headers["Location"] == "http://approot.bar.com/app1"
    assert root.admit(view("/app1"), client="c") is None


def test_body_size_by_content_length() -> None:
    nginx = module(maxBodySize=10)
    big = nginx.admit(view(headers=CIMultiDict({"Content-Length": "11"})), client="c")
    assert big is not None and big.status == 413
    assert nginx.admit(view(headers=CIMultiDict({"Content-Length": "10"})), client="c") is None


def test_cors_any_origin_answers_every_preflight_and_a_list_only_its_origins() -> None:
    anyone = module(cors={})
    preflight = anyone.admit(view(method="OPTIONS"), client="c")
    assert preflight is not None and preflight.status == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == "*"
    assert preflight.headers["Access-Control-Allow-Credentials"] == "true"
    assert preflight.headers["Access-Control-Max-Age"] == "1728000"
    listed = module(cors={"allowOrigins": ["https://*.origin-site.com:4443"]})
    asked = CIMultiDict({"Origin": "https://app.origin-site.com:4443"})
    assert listed.admit(view(method="OPTIONS", headers=asked), client="c") is not None
    stranger = CIMultiDict({"Origin": "https://origin-site.com.evil:4443"})
    assert listed.admit(view(method="OPTIONS", headers=stranger), client="c") is None


def test_canary_by_header_then_by_weight() -> None:
    canary = {"namespace": "shop", "service": "web-canary", "port": 80, "header": "X-Canary"}
    nginx = module(canary={**canary, "weight": 10}, rng=lambda: 0.05)
    assert nginx.backend({"X-Canary": "always"}, MAIN).key.name == "web-canary"
    assert nginx.backend({"X-Canary": "never"}, MAIN) is MAIN
    assert nginx.backend({}, MAIN).key.name == "web-canary"  # 0.05 * 100 < 10
    assert module(canary={**canary, "weight": 10}, rng=lambda: 0.5).backend({}, MAIN) is MAIN
    valued = module(canary={**canary, "headerValue": "beta"})
    assert valued.backend({"X-Canary": "beta"}, MAIN).key.name == "web-canary"
    assert valued.backend({"X-Canary": "always"}, MAIN) is MAIN


def test_limit_connections_counts_requests_in_flight_per_client() -> None:
    nginx = module(connectionLimit=2)
    with holding():
        assert nginx.admit(view(), client="a") is None
        with holding():
            assert nginx.admit(view(), client="a") is None
            with holding():
                refused = nginx.admit(view(), client="a")
                assert refused is not None and refused.status == 503
                assert nginx.admit(view(), client="b") is None
        with holding():
            assert nginx.admit(view(), client="a") is None  # one was given back


def test_timeouts_protocol_and_vhost() -> None:
    nginx = module(connectTimeout=15, readTimeout=120, backendProtocol="GRPC", upstreamVhost="in")
    assert nginx.deadlines(Deadlines(request=300)) == Deadlines(request=300, attempt=135, idle=120)
    assert module(connectTimeout=5).deadlines(Deadlines()) == Deadlines(attempt=65)
    assert nginx.protocol == "grpc"
    headers: dict[str, str] = {"Host": "outside"}
    nginx.upstream_headers(headers)
    assert headers["Host"] == "in"


def test_ssl_redirect_believes_x_forwarded_proto_only_from_a_trusted_proxy() -> None:
    chain = compile_modules(
        Modules.model_validate({"ingressNginx": {"sslRedirect": True}}),
        {},
        trusted_proxies=["10.0.0.0/8"],
    )
    https = CIMultiDict({"X-Forwarded-Proto": "https"})
    assert chain.check_request(view(peer_ip="10.1.2.3", headers=https, authority="a")) is None
    spoofed = chain.check_request(view(peer_ip="192.0.2.1", headers=https, authority="a"))
    assert spoofed is not None and spoofed.status == 308


def test_the_chain_runs_it_before_ip_restriction() -> None:
    chain = compile_modules(
        Modules.model_validate(
            {
                "ingressNginx": {"redirect": "https://elsewhere.example"},
                "ipRestriction": {"allow": ["10.0.0.0/8"]},
            }
        ),
        {},
    )
    assert chain.names[0] == "ingressNginx"
    refused = chain.check_request(view(peer_ip="192.0.2.1"))
    assert refused is not None and refused.status == 301
