"""The mesh listener end to end: a cluster client calls a Service through
``--mesh-addr`` by ``Host`` header or as an ``HTTP_PROXY`` client, and the request is routed by
that Service port's outbound policy as the client namespace (``default``) sees it — the Gateway
API mesh conformance behaviours on the wire, with echo backends reporting what they received.
"""

from __future__ import annotations

import pytest

from tests.kit.e2e_clients import eventually
from tests.kit.mesh_env import MeshEnv, Via, ref, route_obj
from tests.kit.mesh_env import mesh as mesh  # the fixture

REASON = "X-Interlock-Reason"


@pytest.mark.parametrize("via", ["host", "proxy"])
async def test_each_dns_form_of_a_service_reaches_it(mesh: MeshEnv, via: Via) -> None:
    await mesh.serve("web")
    first = await mesh.until_backend("web.default.svc.cluster.local", "web", "/a/b?x=1", via=via)
    assert first.echo["method"] == "GET"
    assert first.echo["path"] == "/a/b"
    assert first.echo["query"] == "x=1"
    for authority in ("web.default", "web.default.svc", "web.default.svc:80", "web.default:80"):
        reply = await mesh.call(authority, "/p", via=via)
        assert reply.backend == "web", (authority, reply)
        # The client's Host goes upstream (aiohttp's proxy client leaves out a default port).
        assert reply.echo["headers"]["host"] in (authority, authority.removesuffix(":80"))


async def test_each_service_port_reaches_its_own_endpoints(mesh: MeshEnv) -> None:
    await mesh.serve("multi", ports=(80, 8080))
    await mesh.until_backend("multi.default:8080", "multi:8080")
    assert (await mesh.call("multi.default")).backend == "multi:80"
    assert (await mesh.call("multi.default.svc:8080", via="proxy")).backend == "multi:8080"


@pytest.mark.parametrize(
    "authority", ["web", "web.default.svc.example.org", "127.0.0.1:80", "web.default:99999"]
)
async def test_an_authority_that_names_no_service_is_404_with_a_reason(
    mesh: MeshEnv, authority: str
) -> None:
    reply = await mesh.call(authority)
    assert reply.status == 404
    assert reply.headers[REASON] == "unknown-host"
    assert reply.body.startswith(b"unknown-host: ")


async def test_a_service_that_does_not_exist_answers_its_default_routes_500(
    mesh: MeshEnv,
) -> None:
    reply = await mesh.call("ghost.default.svc")
    assert reply.status == 500
    assert b"ghost" in reply.body
    # Created later, the same authority reaches it: the listener follows the policy.
    await mesh.serve("ghost")
    await mesh.until_backend("ghost.default.svc", "ghost")


async def test_no_ready_endpoint_is_503(mesh: MeshEnv) -> None:
    await mesh.cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "empty", "namespace": "default"},
            "spec": {"ports": [{"name": "p80", "port": 80, "protocol": "TCP"}]},
        }
    )
    reply = await mesh.until("empty.default", lambda r: r.status == 503, message="503")
    assert reply.headers[REASON] == "no-ready-endpoints"


async def test_path_header_query_and_method_matches_choose_the_rule(mesh: MeshEnv) -> None:
    for name in ("web", "by-path", "by-header", "by-query", "by-method"):
        await mesh.serve(name)
    rules = [
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/v2"}}],
            "backendRefs": [ref("by-path")],
        },
        {
            "matches": [{"headers": [{"name": "x-canary", "value": "yes"}]}],
            "backendRefs": [ref("by-header")],
        },
        {
            "matches": [{"queryParams": [{"name": "debug", "value": "1"}]}],
            "backendRefs": [ref("by-query")],
        },
        {"matches": [{"method": "DELETE"}], "backendRefs": [ref("by-method")]},
        {"backendRefs": [ref("web")]},
    ]
    await mesh.cluster.apply(route_obj("matches", parent="web", rules=rules))
    await mesh.until_backend("web.default", "by-path", "/v2/x")
    assert (await mesh.call("web.default", "/v2")).backend == "by-path"
    assert (await mesh.call("web.default", "/v20")).backend == "web"
    assert (await mesh.call("web.default", "/", headers={"X-Canary": "yes"})).backend == (
        "by-header"
    )
    assert (await mesh.call("web.default", "/?debug=1", via="proxy")).backend == "by-query"
    assert (await mesh.call("web.default", "/", method="DELETE")).backend == "by-method"
    assert (await mesh.call("web.default", "/")).backend == "web"


async def test_weights_split_the_traffic(mesh: MeshEnv) -> None:
    for name in ("web", "blue", "green"):
        await mesh.serve(name)
    split = route_obj(
        "split",
        parent="web",
        rules=[{"backendRefs": [ref("blue", weight=1), ref("green", weight=0)]}],
    )
    await mesh.cluster.apply(split)
    await mesh.until_backend("web.default", "blue")
    assert {(await mesh.call("web.default")).backend for _ in range(20)} == {"blue"}
    split["spec"]["rules"][0]["backendRefs"] = [ref("blue", weight=1), ref("green", weight=1)]
    await mesh.cluster.apply(split)
    # 50/50: both are reached; 200 requests all going one way has probability 2 * 2^-200.
    seen = [(await mesh.until_backend("web.default", "green")).backend]
    seen += [(await mesh.call("web.default")).backend for _ in range(200)]
    assert set(seen) == {"blue", "green"}


async def test_a_consumer_route_applies_to_its_own_namespace_only(mesh: MeshEnv) -> None:
    for namespace in ("mesh-shop", "mesh-other"):
        await mesh.cluster.namespace(namespace)
    for name in ("shop", "reviews", "canary"):
        await mesh.serve(name, namespace="mesh-shop")
    await mesh.until_backend("shop.mesh-shop.svc", "shop")

    def only(path: str, backend: str) -> list[dict[str, object]]:
        return [
            {
                "matches": [{"path": {"type": "PathPrefix", "value": path}}],
                "backendRefs": [ref(backend, namespace="mesh-shop")],
            }
        ]

    # A producer route (every client), a consumer route of the listener's client namespace
    # (default) and one of another namespace, on disjoint paths: which apply is the point here.
    # GEP-1294: a namespace with consumer routes for the Service uses only those, so the
    # producer route applies to the listener's namespace only once its consumer route is gone.
    routes = [
        route_obj("producer", namespace="mesh-shop", parent="shop", rules=only("/p", "reviews")),
        route_obj(
            "mine",
            parent="shop",
            parent_namespace="mesh-shop",
            rules=only("/mine", "canary"),
        ),
        route_obj(
            "theirs",
            namespace="mesh-other",
            parent="shop",
            parent_namespace="mesh-shop",
            rules=only("/theirs", "canary"),
        ),
    ]
    for route in reversed(routes):
        await mesh.cluster.apply(route)
        if route["metadata"]["name"] == "theirs":
            # Seen by the controller (its status written) before the others exist.
            await eventually(
                lambda route=route: mesh.has_status(route), message="theirs has a status"
            )
    await mesh.until_backend("shop.mesh-shop", "canary", "/mine/x")
    theirs = await mesh.call("shop.mesh-shop", "/theirs/x")
    assert (theirs.status, theirs.headers["X-Interlock-Reason"]) == (404, "no-route")
    await eventually(lambda: mesh.has_status(routes[0]), message="the producer has a status")
    producer = await mesh.call("shop.mesh-shop", "/p/1")
    assert (producer.status, producer.headers["X-Interlock-Reason"]) == (404, "no-route")
    # Without its consumer route, the namespace gets the producer route.
    await mesh.cluster.delete(routes[1])
    await mesh.until_backend("shop.mesh-shop", "reviews", "/p/1")
