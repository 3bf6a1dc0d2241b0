"""Gateway API north-south: a GatewayClass of ours, Gateways on their own addresses, HTTPRoutes.

What a user of interlock as a Gateway controller sees (both lanes): the class is Accepted with
its supported features; each Gateway gets an address from ``--gateway-addresses`` in
``status.addresses``, is Accepted and Programmed, and its listeners report their conditions and
``attachedRoutes``; an HTTPRoute naming the Gateway is Accepted with ResolvedRefs, and requests
to the Gateway's address reach the route's backend — two Gateways with the same port and
hostname are told apart by their addresses. Routes that cannot attach say why with the
Gateway API's reasons, and a listener that cannot work does not take the others down.
"""

from __future__ import annotations

import asyncio
import socket

from interlock.dataplane.http2_server import H2ServerProtocol
from interlock.dataplane.request_stream import H2Request, Responder
from tests.kit.dataplane_env import service_obj, slice_obj
from tests.kit.e2e_clients import eventually
from tests.kit.gateway_env import CLASS, Env, conditions, gateway_obj, http_listener, route_obj
from tests.kit.gateway_env import env as env
from tests.kit.lanes import ENDPOINT_HOST


async def test_class_accepted_gateway_addressed_and_route_served(env: Env) -> None:
    await env.cluster.apply(gateway_obj("one", http_listener("http")))
    await env.cluster.apply(gateway_obj("two", http_listener("http")))
    same_host = {"hostnames": ["shop.example"]}
    await env.cluster.apply(route_obj("to-blue", [{"name": "one"}], "blue", **same_host))
    await env.cluster.apply(route_obj("to-green", [{"name": "two"}], "green", **same_host))

    async def class_accepted() -> bool:
        obj = await env.read("GatewayClass", CLASS)
        features = (obj or {}).get("status", {}).get("supportedFeatures", [])
        return (
            conditions(obj).get("Accepted") == ("True", "Accepted")
            and {"name": "HTTPRoute"} in features
        )

    await eventually(class_accepted, message="the GatewayClass is Accepted with its features")
    one, two = await env.address("one"), await env.address("two")
    assert one != two

    async def gateway_ready() -> bool:
        obj = await env.read("Gateway", "one")
        status = (obj or {}).get("status", {})
        listeners = status.get("listeners", [])
        generation = (obj or {}).get("metadata", {}).get("generation")
        return (
            conditions(obj).get("Accepted") == ("True", "Accepted")
            and conditions(obj).get("Programmed") == ("True", "Programmed")
            and len(listeners) == 1
            and listeners[0]["attachedRoutes"] == 1
            and {c["type"]: c["status"] for c in listeners[0]["conditions"]}
            == {
                "Accepted": "True",
                "Conflicted": "False",
                "ResolvedRefs": "True",
                "Programmed": "True",
            }
            and all(c["observedGeneration"] == generation for c in status["conditions"])
        )

    await eventually(gateway_ready, message="Gateway one is Programmed with one attached route")

    async def route_accepted() -> bool:
        found = await env.parent_conditions("to-blue", "one")
        return found == {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("True", "ResolvedRefs")}

    await eventually(route_accepted, message="HTTPRoute to-blue is Accepted by Gateway one")

    # The same port and hostname on two Gateways: each address serves its own route.
    async def both_served() -> bool:
        return (
            await env.backend_of(one, "shop.example") == "blue"
            and await env.backend_of(two, "shop.example") == "green"
        )

    await eventually(both_served, message="each Gateway's address reaches its own backend")
    assert await env.backend_of(one, "other.example") == 404


async def test_routes_that_cannot_attach_say_why(env: Env) -> None:
    await env.cluster.apply(
        gateway_obj(
            "one",
            http_listener("web", hostname="web.example"),
            {"name": "ftp", "port": 21, "protocol": "FTP"},
        )
    )
    await env.cluster.apply(
        route_obj("wrong-section", [{"name": "one", "sectionName": "nope"}], "blue")
    )
    await env.cluster.apply(
        route_obj("wrong-host", [{"name": "one"}], "blue", hostnames=["other.example"])
    )
    await env.cluster.apply(route_obj("missing-backend", [{"name": "one"}], "absent"))
    address = await env.address("one")

    async def reasons() -> bool:
        return (
            (await env.parent_conditions("wrong-section", "one")).get("Accepted")
            == ("False", "NoMatchingParent")
            and (await env.parent_conditions("wrong-host", "one")).get("Accepted")
            == ("False", "NoMatchingListenerHostname")
            and (await env.parent_conditions("missing-backend", "one"))
            == {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("False", "BackendNotFound")}
        )

    await eventually(reasons, message="each route's parent status names the spec's reason")

    async def listener_states() -> bool:
        obj = await env.read("Gateway", "one")
        listeners = {
            entry["name"]: {c["type"]: (c["status"], c["reason"]) for c in entry["conditions"]}
            for entry in (obj or {}).get("status", {}).get("listeners", [])
        }
        return (
            conditions(obj).get("Accepted") == ("True", "ListenersNotValid")
            and listeners.get("ftp", {}).get("Accepted") == ("False", "UnsupportedProtocol")
            and listeners.get("web", {}).get("Programmed") == ("True", "Programmed")
        )

    await eventually(listener_states, message="the FTP listener is refused, the HTTP one served")

    # The route whose backend does not exist attaches and answers 500; the others serve nothing.
    async def answers_500() -> bool:
        return await env.backend_of(address, "web.example") == 500

    await eventually(answers_500, message="a route to a missing backend answers 500")


async def test_a_port_that_cannot_be_opened_is_reported_and_opened_once_free(env: Env) -> None:
    # Someone else holds port 8080 of the address the Gateway is about to get.
    blocker = socket.socket()
    blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    blocker.bind((env.pool[0], 8080))
    blocker.listen()
    try:
        await env.cluster.apply(
            gateway_obj("one", http_listener("web"), http_listener("alt", port=8080))
        )
        await env.cluster.apply(route_obj("to-blue", [{"name": "one"}], "blue"))
        address = await env.address("one")
        assert address == env.pool[0]

        async def listener_states() -> dict[str, dict[str, tuple[str, str]]]:
            obj = await env.read("Gateway", "one")
            return {
                entry["name"]: {c["type"]: (c["status"], c["reason"]) for c in entry["conditions"]}
                for entry in (obj or {}).get("status", {}).get("listeners", [])
            }

        async def refused() -> bool:
            states = await listener_states()
            return (
                states.get("alt", {}).get("Accepted") == ("False", "PortUnavailable")
                and states.get("web", {}).get("Programmed") == ("True", "Programmed")
                and await env.backend_of(address, "any.example") == "blue"
            )

        await eventually(refused, message="the taken port is reported, the other one serves")
    finally:
        blocker.close()

    async def opened() -> bool:
        states = await listener_states()
        return (
            states.get("alt", {}).get("Programmed") == ("True", "Programmed")
            and await env.backend_of(address, "any.example", port=8080) == "blue"
        )

    await eventually(opened, message="the port is opened once it is free")


async def test_a_backend_port_of_app_protocol_h2c_is_reached_over_h2c(env: Env) -> None:
    """An HTTP/1.1 client, an ``appProtocol: kubernetes.io/h2c`` backend port: HTTP/2 upstream."""

    async def answer(request: H2Request, responder: Responder) -> None:
        responder.send_headers(200, [("x-echo", "h2c"), ("x-path", request.path)], end=True)

    server = await asyncio.get_running_loop().create_server(
        lambda: H2ServerProtocol(answer, scheme="http"), ENDPOINT_HOST, 0
    )
    try:
        port = server.sockets[0].getsockname()[1]
        service = service_obj("h2c-only")
        service["spec"]["ports"][0]["appProtocol"] = "kubernetes.io/h2c"
        await env.cluster.apply(service)
        await env.cluster.apply(slice_obj("h2c-only", port))
        await env.cluster.apply(gateway_obj("one", http_listener("http")))
        await env.cluster.apply(route_obj("to-h2c", [{"name": "one"}], "h2c-only"))
        address = await env.address("one")

        async def reached() -> bool:
            return await env.backend_of(address, "any.example", "/over-h2c") == "h2c"

        await eventually(reached, message="the HTTP/1.1 request reaches the h2c-only backend")
    finally:
        server.close()


async def test_request_mirror_copies_requests_to_another_backend(env: Env) -> None:
    route = route_obj("mirrored", [{"name": "one"}], "blue")
    route["spec"]["rules"][0]["filters"] = [
        {"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "green", "port": 80}}}
    ]
    await env.cluster.apply(gateway_obj("one", http_listener("http")))
    await env.cluster.apply(route)
    address = await env.address("one")

    async def mirrored() -> bool:
        answered = await env.backend_of(address, "any.example", "/copied")
        return answered == "blue" and any(
            r["path"] == "/copied" for r in env.echoes["green"].received
        )

    await eventually(mirrored, message="blue answers and green gets a copy")

    async def accepted() -> bool:  # the status is written beside the data plane, maybe later
        return await env.parent_conditions("mirrored", "one") == {
            "Accepted": ("True", "Accepted"),
            "ResolvedRefs": ("True", "ResolvedRefs"),
        }

    await eventually(accepted, message="the mirrored route is accepted")
