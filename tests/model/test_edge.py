"""desired_edges and its per-Ingress pieces: the Ingress edge cases users rely on."""

from typing import Any

import pytest

from interlock.model.edge import (
    DesiredEdge,
    EdgeBackend,
    EdgesResult,
    desired_edges,
    edge_from_parts,
    ingress_dependencies,
    ingress_host_routes,
)
from interlock.model.ingress import Ingress, IngressClass
from interlock.model.meta import ObjectKey
from interlock.model.moduleset import ModuleSet, Secret, SecretKeyRef, SecretValue
from interlock.model.service import Service
from tests.kit.edge_builders import (
    CLASSES,
    NS,
    OTHER_CLASS,
    OUR_CLASS,
    OUR_DEFAULT_CLASS,
    PLANTED,
    ingress,
    module_set,
    path,
    rule,
    secret,
    service,
)


def edges(
    ingresses: list[Ingress],
    *,
    classes: list[IngressClass] = CLASSES,
    module_sets: list[ModuleSet] = (),  # type: ignore[assignment]
    secrets: list[Secret] = (),  # type: ignore[assignment]
    services: list[Service] | None = None,
) -> EdgesResult:
    return desired_edges(
        ingresses, classes, module_sets, secrets, [service()] if services is None else services
    )


def only_edge(result: EdgesResult) -> DesiredEdge:
    assert list(result.edges) == [next(iter(result.edges))]
    return next(iter(result.edges.values()))


def key(name: str, namespace: str = NS) -> ObjectKey:
    return ObjectKey(namespace=namespace, name=name)


# --- routes and backends -------------------------------------------------------------------------


def test_one_edge_per_host_with_routes_in_match_order() -> None:
    result = edges(
        [
            ingress(
                "web",
                rule("A.example.com", path("/"), path("/api/v1", port="http")),
                rule("a.example.com", path("/api/v1/users", path_type="Exact")),
                rule("b.example.com.", path("/")),
            )
        ]
    )
    assert list(result.edges) == ["a.example.com", "b.example.com"]
    routes = result.edges["a.example.com"].routes
    assert [r.route_id for r in routes] == ["Exact:/api/v1/users", "Prefix:/api/v1", "Prefix:/"]
    assert all(r.ingress == key("web") for r in routes)
    assert routes[1].backend == EdgeBackend(namespace=NS, service="web", port=80, port_name="http")
    assert result.conflicts == ()
    assert result.ingress_errors == ()


def test_port_by_number_carries_the_service_port_name_for_endpoint_slices() -> None:
    result = edges(
        [ingress("web", rule("a", path("/", port=8080)))],
        services=[service("web", ("http", 80), ("admin", 8080))],
    )
    assert only_edge(result).routes[0].backend == EdgeBackend(
        namespace=NS, service="web", port=8080, port_name="admin"
    )


def test_port_by_name_resolves_the_number() -> None:
    result = edges(
        [ingress("web", rule("a", path("/", port="admin")))],
        services=[service("web", ("http", 80), ("admin", 8080))],
    )
    assert only_edge(result).routes[0].backend.port == 8080


@pytest.mark.parametrize(
    ("port", "services", "reason"),
    [
        (80, [], "Service shop/web not found"),
        ("http", [service("web", namespace="elsewhere")], "Service shop/web not found"),
        ("grpc", [service("web", ("http", 80))], 'Service shop/web has no port named "grpc"'),
        (9090, [service("web", ("http", 80))], "Service shop/web has no port 9090"),
        (
            80,
            [service("web", external=True)],
            "Service shop/web is of type ExternalName, which the edge cannot forward to",
        ),
    ],
)
def test_missing_backend_is_kept_with_exists_false(
    port: int | str, services: list[Service], reason: str
) -> None:
    result = edges([ingress("web", rule("a", path("/", port=port)))], services=services)
    [route] = only_edge(result).routes
    # A port name that resolves to no number leaves the number 0.
    number, name = (port, "") if isinstance(port, int) else (0, port)
    assert route.backend == EdgeBackend(
        namespace=NS, service="web", port=number, port_name=name, exists=False, reason=reason
    )
    assert result.ingress_errors == ()


def test_backend_appears_when_service_is_created() -> None:
    ing = ingress("web", rule("a", path("/")))
    before = edges([ing], services=[])
    after = edges([ing], services=[service()])
    assert not only_edge(before).routes[0].backend.exists
    assert only_edge(after).routes[0].backend.exists
    assert before != after


@pytest.mark.parametrize(
    ("written", "path_type", "route_id"),
    [
        ("/api", "Prefix", "Prefix:/api"),
        ("/api/", "Prefix", "Prefix:/api"),
        ("/api/", "ImplementationSpecific", "Prefix:/api"),
        ("", "ImplementationSpecific", "Prefix:/"),
        ("/api/", "Exact", "Exact:/api/"),
        ("/", "Prefix", "Prefix:/"),
    ],
)
def test_path_types(written: str, path_type: str, route_id: str) -> None:
    result = edges([ingress("web", rule("a", path(written, path_type=path_type)))])
    assert [r.route_id for r in only_edge(result).routes] == [route_id]


# --- broken rules --------------------------------------------------------------------------------


def test_broken_rules_are_reported_and_the_rest_still_served() -> None:
    broken: Any = ingress(
        "web",
        {"http": {"paths": [path("/nohost")]}},
        {"host": "no-http.example.com"},
        rule(
            "a.example.com",
            {
                "path": "/bucket",
                "pathType": "Prefix",
                "backend": {"resource": {"kind": "StorageBucket", "name": "b"}},
            },
            path("/regex", path_type="Regex"),
            path("relative"),
            {"path": "/none", "pathType": "Prefix", "backend": {}},
            {"path": "/noport", "pathType": "Prefix", "backend": {"service": {"name": "web"}}},
            {"path": "/notype", "backend": {"service": {"name": "web", "port": {"number": 80}}}},
            path("/ok"),
            path("/ok/"),
        ),
    )
    result = edges([broken])
    assert [r.route_id for r in only_edge(result).routes] == ["Prefix:/ok"]
    assert [str(e) for e in result.ingress_errors] == [
        "Ingress shop/web: spec.rules[0].host: a rule without a host cannot be served: "
        "the edge is chosen by the Host header; set a host",
        "Ingress shop/web: spec.rules[1].http: no paths for host no-http.example.com: "
        "add http.paths or a defaultBackend",
        "Ingress shop/web: spec.rules[2].http.paths[0].backend.resource: "
        "resource backends are not supported; use a service backend",
        'Ingress shop/web: spec.rules[2].http.paths[1].pathType: "Regex" is not supported: '
        "use Exact, Prefix or ImplementationSpecific",
        'Ingress shop/web: spec.rules[2].http.paths[2].path: "relative" must start with "/"',
        "Ingress shop/web: spec.rules[2].http.paths[3].backend.service.name: is required",
        "Ingress shop/web: spec.rules[2].http.paths[4].backend.service.port: "
        "a port number or name is required",
        "Ingress shop/web: spec.rules[2].http.paths[5].pathType: "
        "is required: Exact, Prefix or ImplementationSpecific",
        "Ingress shop/web: spec.rules[2].http.paths[7]: host a.example.com path /ok (Prefix) "
        "is already routed by spec.rules[2].http.paths[6]; this one is ignored",
    ]


def test_ingress_with_only_errors_has_no_edge_but_is_reported() -> None:
    result = edges([ingress("web", {"http": {"paths": [path("/")]}})])
    assert result.edges == {}
    assert [e.field for e in result.ingress_errors] == ["spec.rules[0].host"]
    assert result.ingress_errors[0].ingress == key("web")


# --- defaultBackend ----------------------------------------------------------------------------


def test_default_backend_serves_prefix_root_on_every_host_of_the_ingress() -> None:
    fallback = {"service": {"name": "fallback", "port": {"number": 80}}}
    result = edges(
        [
            ingress(
                "web",
                rule("a", path("/api")),
                {"host": "b"},
                rule("c", path("/", service="web")),
                default_backend=fallback,
            )
        ],
        services=[service("web"), service("fallback")],
    )
    assert result.ingress_errors == ()
    a, b, c = (result.edges[h].routes for h in ("a", "b", "c"))
    assert [(r.route_id, r.backend.service) for r in a] == [
        ("Prefix:/api", "web"),
        ("Prefix:/", "fallback"),
    ]
    assert [(r.route_id, r.backend.service) for r in b] == [("Prefix:/", "fallback")]
    # An explicit "/" rule is not replaced by the default backend.
    assert [(r.route_id, r.backend.service) for r in c] == [("Prefix:/", "web")]


def test_default_backend_without_any_host_is_an_error() -> None:
    result = edges(
        [ingress("web", default_backend={"service": {"name": "web", "port": {"number": 80}}})]
    )
    assert result.edges == {}
    assert [e.field for e in result.ingress_errors] == ["spec.defaultBackend"]


def test_resource_default_backend_is_an_error() -> None:
    result = edges(
        [
            ingress(
                "web",
                rule("a", path("/x")),
                default_backend={"resource": {"kind": "Bucket", "name": "b"}},
            )
        ]
    )
    assert [r.route_id for r in result.edges["a"].routes] == ["Prefix:/x"]
    assert [e.field for e in result.ingress_errors] == ["spec.defaultBackend.resource"]


# --- classes -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("class_name", "classes", "served"),
    [
        ("interlock", [OUR_CLASS], True),
        ("nginx", [OUR_CLASS, OTHER_CLASS], False),
        (None, [OUR_DEFAULT_CLASS, OTHER_CLASS], True),
        (None, [OUR_CLASS, OTHER_CLASS], False),
    ],
)
def test_only_our_ingresses_become_edges(
    class_name: str | None, classes: list[IngressClass], served: bool
) -> None:
    result = edges([ingress("web", rule("a", path("/")), class_name=class_name)], classes=classes)
    assert bool(result.edges) is served


# --- conflicts -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second", "winner"),
    [
        # older creationTimestamp wins, whatever the names
        (("zeta", NS, "2026-01-01T00:00:00Z"), ("alpha", NS, "2026-01-02T00:00:00Z"), "zeta"),
        # same timestamp: namespace, then name
        (("b", "aaa", "2026-01-01T00:00:00Z"), ("a", "zzz", "2026-01-01T00:00:00Z"), "b"),
        (("a", NS, "2026-01-01T00:00:00Z"), ("b", NS, "2026-01-01T00:00:00Z"), "a"),
        # no timestamp counts as newest
        (("z", NS, "2026-01-05T00:00:00Z"), ("a", NS, None), "z"),
    ],
)
def test_conflict_oldest_wins(
    first: tuple[str, str, str | None], second: tuple[str, str, str | None], winner: str
) -> None:
    ingresses = [
        ingress(
            name,
            rule("a.example.com", path("/api", service=name), path(f"/{name}-only", service=name)),
            namespace=namespace,
            created=created,
        )
        for name, namespace, created in (first, second)
    ]
    services = [service(name, namespace=namespace) for name, namespace, _ in (first, second)]
    for order in (ingresses, ingresses[::-1]):
        result = edges(order, services=services)
        edge = result.edges["a.example.com"]
        api = next(r for r in edge.routes if r.route_id == "Prefix:/api")
        assert api.backend.service == winner
        loser = second if winner == first[0] else first
        [conflict] = result.conflicts
        assert conflict.ingress == key(loser[0], loser[1])
        assert conflict.winner.name == winner
        assert (conflict.host, conflict.route_id) == ("a.example.com", "Prefix:/api")
        # The loser's other paths are still served.
        assert {r.route_id for r in edge.routes} == {
            "Prefix:/api",
            f"Prefix:/{first[0]}-only",
            f"Prefix:/{second[0]}-only",
        }


def test_exact_and_prefix_on_the_same_path_do_not_conflict() -> None:
    result = edges(
        [
            ingress("a", rule("h", path("/x", path_type="Exact"))),
            ingress("b", rule("h", path("/x"))),
        ]
    )
    assert result.conflicts == ()
    assert [r.route_id for r in result.edges["h"].routes] == ["Exact:/x", "Prefix:/x"]


def test_edge_from_parts_ignores_mapping_order() -> None:
    a = ingress("a", rule("h", path("/")), created="2026-01-01T00:00:00Z")
    b = ingress("b", rule("h", path("/"), path("/b")), created="2025-01-01T00:00:00Z")
    services = {service().key: service()}
    parts = {i.key: ingress_host_routes(i, {}, {}, services)["h"] for i in (a, b)}
    forward = edge_from_parts("h", parts)
    backward = edge_from_parts("h", dict(reversed(list(parts.items()))))
    assert forward == backward
    edge, [conflict] = forward
    assert conflict.ingress == key("a")
    assert conflict.winner == key("b")
    assert [r.ingress for r in edge.routes] == [key("b"), key("b")]


# --- TLS -----------------------------------------------------------------------------------------


def test_tls_secret_for_hosts_in_a_tls_entry() -> None:
    result = edges(
        [
            ingress(
                "web",
                rule("a.example.com", path("/")),
                rule("b.example.com", path("/")),
                tls=[{"hosts": ["A.example.com"], "secretName": "a-tls"}],
            )
        ]
    )
    assert result.edges["a.example.com"].tls_secret == key("a-tls")
    assert result.edges["b.example.com"].tls_secret is None


def test_tls_secret_of_the_oldest_ingress_naming_one() -> None:
    older = ingress("older", rule("h", path("/a")), created="2025-01-01T00:00:00Z")
    newer = ingress(
        "newer",
        rule("h", path("/b")),
        created="2026-01-01T00:00:00Z",
        tls=[{"hosts": ["h"], "secretName": "newer-tls"}],
    )
    oldest = ingress(
        "oldest",
        rule("h", path("/c")),
        created="2024-01-01T00:00:00Z",
        tls=[{"hosts": ["h"], "secretName": "oldest-tls"}],
    )
    assert edges([older, newer]).edges["h"].tls_secret == key("newer-tls")
    assert edges([newer, older, oldest]).edges["h"].tls_secret == key("oldest-tls")


# --- modules and secrets -------------------------------------------------------------------------

BASIC = {"basicAuth": {"secretRef": {"name": "users", "key": "htpasswd"}}}
ALLOW_A = {"ipRestriction": {"allow": ["10.0.0.0/8"]}}
ALLOW_B = {"ipRestriction": {"allow": ["192.168.0.0/16"]}}


def test_modules_merged_in_annotation_order_with_their_secrets() -> None:
    result = edges(
        [ingress("web", rule("a", path("/")), modules="set-a, set-b")],
        module_sets=[module_set("set-a", {**ALLOW_A, **BASIC}), module_set("set-b", ALLOW_B)],
        secrets=[secret("users", htpasswd=PLANTED, other="x")],
    )
    [route] = only_edge(result).routes
    assert route.module_error is None
    assert route.modules.ip_restriction is not None
    assert route.modules.ip_restriction.allow == ["192.168.0.0/16"]
    assert route.modules.basic_auth is not None
    assert route.secrets == {("users", "htpasswd"): SecretValue(PLANTED.encode())}


def test_secrets_of_overridden_modules_are_not_resolved() -> None:
    other_auth = {"basicAuth": {"secretRef": {"name": "team", "key": "htpasswd"}}}
    result = edges(
        [ingress("web", rule("a", path("/")), modules="set-a,set-b")],
        module_sets=[module_set("set-a", BASIC), module_set("set-b", other_auth)],
        secrets=[secret("team", htpasswd="t")],  # "users" is absent, and not needed
    )
    [route] = only_edge(result).routes
    assert route.module_error is None
    assert set(route.secrets) == {("team", "htpasswd")}


@pytest.mark.parametrize(
    ("annotation", "module_sets", "secrets", "permanent", "reason", "message"),
    [
        (
            "set-a,missing",
            [module_set("set-a", ALLOW_A)],
            [],
            False,
            "ModuleSetNotFound",
            "ModuleSet shop/missing not found",
        ),
        (
            "set-a",
            [module_set("set-a", ALLOW_A, namespace="elsewhere")],
            [],
            False,
            "ModuleSetNotFound",
            "ModuleSet shop/set-a not found",
        ),
        (
            "auth",
            [module_set("auth", BASIC)],
            [],
            False,
            "SecretNotFound",
            "Secret shop/users not found (referenced by basicAuth.secretRef)",
        ),
        (
            "auth",
            [module_set("auth", BASIC)],
            [secret("users", passwd="x")],
            False,
            "SecretNotFound",
            'Secret shop/users has no key "htpasswd" (referenced by basicAuth.secretRef)',
        ),
        (
            "bad",
            [module_set("bad", {"ipRestriction": {"allow": ["10.0.0.0/33"]}})],
            [],
            True,
            "InvalidModuleSet",
            'ModuleSet shop/bad is invalid: spec.modules.ipRestriction.allow[0]: "10.0.0.0/33" '
            "is not a valid CIDR",
        ),
        (
            "unknown-type,missing",
            [module_set("unknown-type", {"waf": {}, "compression": {}})],
            [],
            True,
            "InvalidModuleSet",
            "ModuleSet shop/unknown-type is invalid: spec.modules.waf: unknown module type "
            '"waf" (known types: basicAuth, circuitBreaker, compression, headers, '
            "ipRestriction, jwt, mutualTLS, oauth, oidc, rateLimit, webhookVerification)",
        ),
    ],
)
def test_unresolvable_modules_fail_closed(
    annotation: str,
    module_sets: list[ModuleSet],
    secrets: list[Secret],
    permanent: bool,
    reason: str,
    message: str,
) -> None:
    result = edges(
        [ingress("web", rule("a", path("/"), path("/b")), modules=annotation)],
        module_sets=module_sets,
        secrets=secrets,
    )
    for route in only_edge(result).routes:
        assert route.module_error is not None
        assert route.module_error.permanent is permanent
        assert route.module_error.reason == reason
        assert route.module_error.message == message


def test_modules_that_clash_only_once_merged_are_a_permanent_error() -> None:
    jwt = {"jwt": {"issuer": "i", "jwksSecretRef": {"name": "jwks", "key": "k"}}}
    result = edges(
        [ingress("web", rule("a", path("/")), modules="auth,token")],
        module_sets=[module_set("auth", BASIC), module_set("token", jwt)],
        secrets=[secret("users", htpasswd="x"), secret("jwks", k="{}")],
    )
    [route] = only_edge(result).routes
    assert route.module_error is not None
    assert route.module_error.permanent
    assert route.module_error.message == (
        "ModuleSets shop/auth, shop/token merged: basicAuth and jwt both read the Authorization "
        "header; configure only one of them"
    )


def test_no_annotation_means_no_modules_and_no_error() -> None:
    [route] = only_edge(edges([ingress("web", rule("a", path("/")))])).routes
    assert route.module_error is None
    assert route.modules == module_set("x", {}).spec.modules
    assert route.secrets == {}


def test_secret_values_never_printed() -> None:
    ing = ingress("web", rule("a", path("/")), modules="auth")
    result = edges(
        [ing],
        module_sets=[module_set("auth", BASIC)],
        secrets=[secret("users", htpasswd=PLANTED)],
    )
    [route] = only_edge(result).routes
    assert route.secrets[("users", "htpasswd")].reveal() == PLANTED.encode()
    texts = [
        repr(result),
        str(result),
        result.model_dump_json(),
        repr(route),
        str(route),
        route.model_dump_json(),
        str(route.model_dump()),
    ]
    for text in texts:
        assert PLANTED not in text
    assert '"users/htpasswd":"<redacted>"' in route.model_dump_json()


def test_equal_inputs_give_equal_outputs() -> None:
    def build() -> EdgesResult:
        return edges(
            [ingress("web", rule("a", path("/")), modules="auth")],
            module_sets=[module_set("auth", BASIC)],
            secrets=[secret("users", htpasswd=PLANTED)],
        )

    assert build() == build()
    changed = edges(
        [ingress("web", rule("a", path("/")), modules="auth")],
        module_sets=[module_set("auth", BASIC)],
        secrets=[secret("users", htpasswd="rotated")],
    )
    assert changed != build()


# --- dependencies --------------------------------------------------------------------------------


def test_ingress_dependencies() -> None:
    ing = ingress(
        "web",
        rule("a", path("/", service="web"), path("/api", service="api")),
        rule("b", path("/", service="api"), path("/x", path_type="Regex", service="ignored")),
        {"host": "c"},
        modules="set-b, set-a,set-b",
        default_backend={"service": {"name": "fallback", "port": {"number": 80}}},
    )
    assert ingress_dependencies(ing) == (("set-b", "set-a"), ("api", "fallback", "web"))


def test_module_secret_refs_reexported() -> None:
    from interlock.model.edge import module_secret_refs

    modules = module_set("auth", BASIC).spec.modules
    assert module_secret_refs(modules) == {SecretKeyRef(name="users", key="htpasswd")}
