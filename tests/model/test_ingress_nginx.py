"""ingress-nginx's annotations translated to interlock's modules (model/ingress_nginx.py).

The annotation values are those of ingress-nginx's own documentation
(docs/user-guide/nginx-configuration/annotations.md and docs/examples/rewrite, auth/basic).
"""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from interlock.model.edge import ingress_host_routes
from interlock.model.ingress import CONTROLLER_NAME, Ingress, parse_ingress, parse_ingress_class
from interlock.model.ingress_nginx import (
    CLASS_ANNOTATION,
    NOT_SERVED,
    PREFIX,
    SERVED,
    IngressNginxModule,
    annotations_enabled,
    overridden_by_module_sets,
    regex_route,
    translate,
)
from interlock.model.meta import ObjectKey
from interlock.model.moduleset import ModuleSet, parse_module_set
from tests.kit.edge_builders import NS, OUR_CLASS, path, rule, secret, service


def annotated(
    annotations: dict[str, str],
    *rules: dict[str, Any],
    name: str = "app",
    tls: list[dict[str, Any]] | None = None,
    class_name: str | None = "interlock",
    created: str = "2026-01-01T00:00:00Z",
) -> Ingress:
    spec: dict[str, Any] = {"rules": list(rules) or [rule("app.example.com", path("/"))]}
    if class_name is not None:
        spec["ingressClassName"] = class_name
    if tls is not None:
        spec["tls"] = tls
    return parse_ingress(
        {
            "metadata": {
                "name": name,
                "namespace": NS,
                "creationTimestamp": created,
                "annotations": {PREFIX + k: v for k, v in annotations.items()},
            },
            "spec": spec,
        }
    )


def refused(ingress: Ingress) -> dict[str, str]:
    return {r.annotation.removeprefix(PREFIX): r.reason for r in translate(ingress).refusals}


def routes_of(ingress: Ingress, **objects: Any) -> dict[str, Any]:
    found = ingress_host_routes(
        ingress,
        objects.get("module_sets", {}),
        objects.get("secrets", {}),
        {ObjectKey(namespace=NS, name="web"): service("web", ("http", 80))},
        nginx=translate(ingress),
    )
    return {r.route_id: r for routes in found.values() for r in routes}


# --- access modules -------------------------------------------------------------------------


def test_whitelist_source_range_is_an_allow_list_and_denylist_a_deny_list() -> None:
    nginx = translate(
        annotated(
            {
                "whitelist-source-range": "10.0.0.0/24,172.10.0.1",
                "denylist-source-range": "10.0.0.128/25",
            }
        )
    )
    assert nginx.ip_restriction == {
        "allow": ["10.0.0.0/24", "172.10.0.1/32"],
        "deny": ["10.0.0.128/25"],
    }
    assert nginx.refusals == ()


def test_a_bad_cidr_fails_closed_rather_than_serving_without_the_allow_list() -> None:
    ingress = annotated({"whitelist-source-range": "10.0.0.0/24, 10.0.0.300"})
    assert "10.0.0.300" in refused(ingress)["whitelist-source-range"]
    route = routes_of(ingress)["Prefix:/"]
    assert route.module_error is not None and route.module_error.permanent
    assert "whitelist-source-range" in route.module_error.message


def test_basic_auth_from_the_auth_example() -> None:
    ingress = annotated(
        {
            "auth-type": "basic",
            "auth-secret": "basic-auth",
            "auth-realm": "Authentication Required - foo",
        }
    )
    nginx = translate(ingress)
    assert nginx.basic_auth == {
        "secretRef": {"name": "basic-auth", "key": "auth"},
        "realm": "Authentication Required - foo",
    }
    users = secret("basic-auth", auth="foo:$2y$05$" + "a" * 53)
    route = routes_of(ingress, secrets={users.key: users})["Prefix:/"]
    assert route.module_error is None
    assert route.modules.basic_auth is not None
    assert route.modules.basic_auth.realm == "Authentication Required - foo"
    assert ("basic-auth", "auth") in route.secrets


def test_basic_auth_waits_for_its_secret() -> None:
    route = routes_of(annotated({"auth-type": "basic", "auth-secret": "basic-auth"}))["Prefix:/"]
    assert route.module_error is not None
    assert route.module_error.reason == "SecretNotFound"


@pytest.mark.parametrize(
    ("annotations", "refused_name"),
    [
        ({"auth-type": "digest", "auth-secret": "basic-auth"}, "auth-type"),
        ({"auth-type": "basic"}, "auth-type"),
        ({"auth-type": "basic", "auth-secret": "other/basic-auth"}, "auth-secret"),
        (
            {"auth-type": "basic", "auth-secret": "basic-auth", "auth-secret-type": "auth-map"},
            "auth-secret-type",
        ),
    ],
)
def test_auth_not_served_fails_closed(annotations: dict[str, str], refused_name: str) -> None:
    ingress = annotated(annotations)
    assert refused_name in refused(ingress)
    route = routes_of(ingress)["Prefix:/"]
    assert route.module_error is not None
    assert route.module_error.permanent
    assert route.module_error.reason == "InvalidAnnotation"
    assert f"Ingress {NS}/app" in route.module_error.message


def test_limit_rps_and_rpm_are_rate_limits_per_client() -> None:
    assert translate(annotated({"limit-rps": "5"})).rate_limit == {"requests": 5, "period": "1s"}
    both = annotated({"limit-rps": "5", "limit-rpm": "100"})
    assert translate(both).rate_limit == {"requests": 100, "period": "1m"}
    assert "limit-rpm wins" in refused(both)["limit-rps"]
    assert translate(annotated({"limit-connections": "2"})).route.connection_limit == 2


# --- route settings -------------------------------------------------------------------------


def test_the_rewrite_example_routes_the_literal_prefix_and_keeps_the_pattern() -> None:
    ingress = annotated(
        {"use-regex": "true", "rewrite-target": "/$2"},
        rule("rewrite.bar.com", path("/something(/|$)(.*)", path_type="ImplementationSpecific")),
    )
    routes = routes_of(ingress)
    route = routes["Regex:/something(/|$)(.*)"]
    assert (route.path, route.path_type) == ("/something", "Prefix")
    assert route.modules.ingress_nginx == IngressNginxModule(
        pathPattern="/something(/|$)(.*)", rewriteTarget="/$2"
    )


@pytest.mark.parametrize(
    ("written", "prefix"),
    [
        ("/something(/|$)(.*)", "/something"),
        ("/something/?(.*)", "/something"),
        ("/api/v[0-9]+/(.*)", "/api"),
        ("/.*", "/"),
        ("/plain", "/plain"),
        ("/a/b/(.*)", "/a/b"),
    ],
)
def test_regex_route_prefix(written: str, prefix: str) -> None:
    assert regex_route(written).prefix == prefix


@pytest.mark.parametrize(
    ("written", "refused"),
    [
        ("/(a+)+$", True),
        ("/(a|b)*c", True),
        ("/(x(y)+z)+", True),
        ("/(a*){2,}", True),
        ("/something(/|$)(.*)", False),
        ("/foo/?(.*)", False),
        ("/([a-z]+)?/(.*)", False),
        ("/([(]+)x", False),
        ("/(ab){2}", False),
    ],
)
def test_a_repeated_repetition_is_refused_as_a_redos_risk(written: str, refused: bool) -> None:
    assert bool(regex_route(written).problem) is refused
    if refused:
        ingress = annotated({"use-regex": "true"}, rule("a.example.com", path(written)))
        route = next(iter(routes_of(ingress).values()))
        assert route.module_error is not None and "exponential" in route.module_error.message


def test_an_invalid_regex_path_serves_nothing() -> None:
    ingress = annotated({"use-regex": "true"}, rule("a.example.com", path("/x(")))
    route = next(iter(routes_of(ingress).values()))
    assert route.module_error is not None and "regular expression" in route.module_error.message


def test_redirects_from_the_documentation() -> None:
    permanent = translate(annotated({"permanent-redirect": "https://www.google.com"})).route
    assert (permanent.redirect, permanent.redirect_status) == ("https://www.google.com", 301)
    coded = translate(
        annotated(
            {"permanent-redirect": "https://www.google.com", "permanent-redirect-code": "308"}
        )
    ).route
    assert coded.redirect_status == 308
    temporal = translate(annotated({"temporal-redirect": "https://www.google.com"})).route
    assert (temporal.redirect, temporal.redirect_status) == ("https://www.google.com", 302)
    assert translate(annotated({"app-root": "/app1"})).route.app_root == "/app1"


def test_ssl_redirect_on_hosts_with_tls_unless_turned_off_and_forced_everywhere() -> None:
    tls = [{"hosts": ["app.example.com"], "secretName": "cert"}]
    with_tls = routes_of(annotated({"enable-cors": "true"}, tls=tls))["Prefix:/"]
    assert with_tls.modules.ingress_nginx is not None
    assert with_tls.modules.ingress_nginx.ssl_redirect
    off = routes_of(annotated({"ssl-redirect": "false"}, tls=tls))["Prefix:/"]
    assert off.modules.ingress_nginx is None
    without_tls = routes_of(annotated({"ssl-redirect": "true"}))["Prefix:/"]
    assert without_tls.modules.ingress_nginx is None
    forced = routes_of(annotated({"force-ssl-redirect": "true"}))["Prefix:/"]
    assert forced.modules.ingress_nginx is not None and forced.modules.ingress_nginx.ssl_redirect


def test_cors_with_the_documented_values() -> None:
    cors = translate(
        annotated(
            {
                "enable-cors": "true",
                "cors-allow-methods": "PUT, GET, POST, OPTIONS",
                "cors-allow-headers": "X-Forwarded-For, X-app123-XPTO",
                "cors-expose-headers": "*, X-CustomResponseHeader",
                "cors-allow-origin": (
                    "https://origin-site.com:4443, http://origin-site.com, https://example.org:1199"
                ),
                "cors-allow-credentials": "false",
                "cors-max-age": "600",
            }
        )
    ).route.cors
    assert cors is not None
    assert cors.allow_origins == (
        "https://origin-site.com:4443",
        "http://origin-site.com",
        "https://example.org:1199",
    )
    assert cors.allow_methods == "PUT, GET, POST, OPTIONS"
    assert cors.allow_headers == "X-Forwarded-For, X-app123-XPTO"
    assert cors.expose_headers == "*, X-CustomResponseHeader"
    assert (cors.allow_credentials, cors.max_age) == (False, 600)


def test_cors_defaults_are_ingress_nginx_defaults() -> None:
    cors = translate(annotated({"enable-cors": "true"})).route.cors
    assert cors is not None
    assert cors.allow_origins == ("*",)
    assert cors.allow_methods == "GET, PUT, POST, DELETE, PATCH, OPTIONS"
    assert (cors.allow_credentials, cors.max_age) == (True, 1728000)
    assert "enable-cors" in refused(annotated({"cors-max-age": "600"}))["cors-max-age"]


def test_forwarding_settings() -> None:
    route = translate(
        annotated(
            {
                "proxy-body-size": "8m",
                "proxy-connect-timeout": "15",
                "proxy-read-timeout": "120",
                "backend-protocol": "GRPC",
                "upstream-vhost": "internal.example.com",
            }
        )
    ).route
    assert route.max_body_size == 8 * 1024 * 1024
    assert (route.connect_timeout, route.read_timeout) == (15.0, 120.0)
    assert route.backend_protocol == "GRPC"
    for protocol in ("HTTPS", "GRPCS", "https"):
        served = translate(annotated({"backend-protocol": protocol}))
        assert served.route.backend_protocol == protocol.upper()
        assert served.refusals == () and served.fail_closed == ()
    assert "backend-protocol" in refused(annotated({"backend-protocol": "AJP"}))
    assert route.upstream_vhost == "internal.example.com"
    assert translate(annotated({"proxy-body-size": "0"})).route.max_body_size is None


# --- nothing ignored silently ---------------------------------------------------------------


def test_snippets_and_unserved_annotations_are_refused_by_name() -> None:
    reasons = refused(
        annotated(
            {
                "configuration-snippet": 'more_set_headers "Request-Id: $req_id";',
                "server-snippet": "set $agentflag 0;",
                "affinity": "cookie",
                "proxy-send-timeout": "120",
                "made-up": "x",
            }
        )
    )
    assert "CVE-2021-25742" in reasons["configuration-snippet"]
    assert "never served" in reasons["server-snippet"]
    assert "affinity" in reasons["affinity"]
    assert "--edge-body-timeout" in reasons["proxy-send-timeout"]
    assert "not an ingress-nginx annotation interlock knows" in reasons["made-up"]


@pytest.mark.parametrize("name", SERVED)
def test_every_served_annotation_is_not_also_listed_as_refused(name: str) -> None:
    assert not NOT_SERVED.get(name)


def test_malformed_values_are_refused_and_the_rest_served() -> None:
    ingress = annotated(
        {"proxy-read-timeout": "2m", "limit-rps": "many", "enable-cors": "yes", "app-root": "/a"}
    )
    reasons = refused(ingress)
    assert set(reasons) == {"proxy-read-timeout", "limit-rps", "enable-cors"}
    assert translate(ingress).route.app_root == "/a"
    assert routes_of(ingress)["Prefix:/"].module_error is None


# --- canary ---------------------------------------------------------------------------------


def test_a_canary_ingress_joins_the_main_route_of_its_host_and_path() -> None:
    from interlock.model.edge import edge_from_parts

    main = annotated({}, rule("echo.example.com", path("/", service="web")), name="main")
    canary = annotated(
        {"canary": "true", "canary-weight": "10", "canary-by-header": "X-Canary"},
        rule("echo.example.com", path("/", service="web")),
        name="canary",
        created="2026-01-02T00:00:00Z",
    )
    parts = {
        ObjectKey(namespace=NS, name="main"): list(routes_of(main).values()),
        ObjectKey(namespace=NS, name="canary"): list(routes_of(canary).values()),
    }
    edge, conflicts = edge_from_parts("echo.example.com", parts)
    assert conflicts == []
    (route,) = edge.routes
    assert route.ingress == ObjectKey(namespace=NS, name="main")
    assert route.modules.ingress_nginx is not None
    joined = route.modules.ingress_nginx.canary
    assert joined is not None
    assert (joined.service, joined.weight, joined.weight_total, joined.header) == (
        "web",
        10,
        100,
        "X-Canary",
    )
    alone, _ = edge_from_parts(
        "echo.example.com",
        {ObjectKey(namespace=NS, name="canary"): parts[ObjectKey(namespace=NS, name="canary")]},
    )
    assert alone.routes == ()


# --- opt-in and combining with ModuleSets ---------------------------------------------------


def test_opt_in_by_flag_or_by_the_class_annotation() -> None:
    ingress = annotated({"enable-cors": "true"})
    assert not annotations_enabled(ingress, [OUR_CLASS], flag=False)
    assert annotations_enabled(ingress, [OUR_CLASS], flag=True)
    opted = parse_ingress_class(
        {
            "metadata": {"name": "nginx", "annotations": {CLASS_ANNOTATION: "true"}},
            "spec": {"controller": CONTROLLER_NAME},
        }
    )
    assert annotations_enabled(annotated({}, class_name="nginx"), [OUR_CLASS, opted], flag=False)
    assert not annotations_enabled(ingress, [OUR_CLASS, opted], flag=False)


def test_a_module_set_module_replaces_the_annotation_and_says_so() -> None:
    ingress = annotated(
        {"whitelist-source-range": "10.0.0.0/24", "limit-rps": "5"},
        rule("app.example.com", path("/")),
    )
    ingress = ingress.model_copy(
        update={
            "metadata": ingress.metadata.model_copy(
                update={
                    "annotations": {
                        **ingress.metadata.annotations,
                        "interlock.dev/modules": "office",
                    }
                }
            )
        }
    )
    office = parse_module_set(
        {
            "metadata": {"name": "office", "namespace": NS},
            "spec": {"modules": {"ipRestriction": {"allow": ["192.168.0.0/16"]}}},
        }
    )
    route = routes_of(ingress, module_sets={office.key: office})["Prefix:/"]
    assert route.modules.ip_restriction is not None
    assert route.modules.ip_restriction.allow == ["192.168.0.0/16"]
    assert route.modules.rate_limit is not None  # the annotation's: no ModuleSet sets one
    notes = overridden_by_module_sets(translate(ingress), [(f"{NS}/office", ["ipRestriction"])])
    assert [n.annotation for n in notes] == [PREFIX + "whitelist-source-range"]
    assert f"ModuleSet {NS}/office" in notes[0].reason


def test_a_module_set_cannot_name_the_internal_module() -> None:
    module_set: ModuleSet = parse_module_set(
        {
            "metadata": {"name": "sneaky", "namespace": NS},
            "spec": {"modules": {"ingressNginx": {"redirect": "https://evil.example"}}},
        }
    )
    problems = module_set.problems
    assert problems and "unknown module type" in problems[0].reason
    assert module_set.spec.modules.ingress_nginx is None


def test_the_documentation_lists_every_annotation_served_or_not() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "ingress-nginx.md").read_text()
    rows = {
        line.split("`")[1]: line.split("|")[2].strip()
        for line in text.splitlines()
        if line.startswith("| `") and line.split("|")[2].strip() in ("served", "not served")
    }
    assert {name for name, kind in rows.items() if kind == "served"} == set(SERVED)
    assert {name for name, kind in rows.items() if kind == "not served"} == {
        name for name, reason in NOT_SERVED.items() if reason
    }


def test_desired_edges_translates_where_the_actors_do() -> None:
    from interlock.model.edge import desired_edges

    ingress = annotated({"app-root": "/app1"}, class_name="nginx")
    opted = parse_ingress_class(
        {
            "metadata": {"name": "nginx", "annotations": {CLASS_ANNOTATION: "true"}},
            "spec": {"controller": CONTROLLER_NAME},
        }
    )
    web = service("web", ("http", 80))
    (route,) = desired_edges([ingress], [opted], [], [], [web]).edges["app.example.com"].routes
    assert route.modules.ingress_nginx == IngressNginxModule(appRoot="/app1")
    plain = opted.model_copy(
        update={"metadata": opted.metadata.model_copy(update={"annotations": {}})}
    )
    (route,) = desired_edges([ingress], [plain], [], [], [web]).edges["app.example.com"].routes
    assert route.modules.ingress_nginx is None
    flagged = desired_edges([ingress], [plain], [], [], [web], ingress_nginx_annotations=True)
    assert flagged.edges["app.example.com"].routes[0].modules.ingress_nginx is not None


@given(
    st.dictionaries(
        st.sampled_from([*SERVED, *NOT_SERVED, "configuration-snippet", "made-up"]),
        st.text(max_size=40),
        max_size=12,
    )
)
def test_translate_is_total_and_every_annotation_is_served_or_refused(
    annotations: dict[str, str],
) -> None:
    ingress = annotated(annotations)
    nginx = translate(ingress)  # never raises, whatever the values
    refused_names = {r.annotation.removeprefix(PREFIX) for r in nginx.refusals}
    for name in annotations:
        assert name in SERVED or name in refused_names, name
    routes_of(ingress)  # and the routes are computed from it without raising
