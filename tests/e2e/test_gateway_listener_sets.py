"""ListenerSets: listeners declared beside a Gateway, served on its address when it allows them.

What a user sees (both lanes, the real lane with the Gateway API's own CRDs): a Gateway whose
``allowedListeners`` admits its namespace takes a ListenerSet's listeners — the ListenerSet is
Accepted and Programmed, each of its listeners reports its conditions and ``attachedRoutes``,
the Gateway counts it in ``attachedListenerSets``, and a route whose parentRef names the
ListenerSet is served on the Gateway's address for the ListenerSet's hostname. A listener that
repeats the Gateway's port and hostname is refused (``HostnameConflict``) and the Gateway's
listener keeps its traffic. When the Gateway stops admitting ListenerSets, the ListenerSet says
``NotAllowed``, its routes say why, and its hostname is no longer served. An HTTPS listener of a
ListenerSet terminates TLS with the ListenerSet's certificate, chosen by the server name beside
the Gateway's own.
"""

from __future__ import annotations

from typing import Any

from tests.kit.e2e_clients import eventually
from tests.kit.gateway_env import (
    GROUP,
    Env,
    conditions,
    gateway_obj,
    http_listener,
    listener_set_obj,
    route_obj,
)
from tests.kit.gateway_env import env as env
from tests.kit.gateway_tls import https_backend, https_listener, self_signed_secret


def listener_states(obj: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {
        entry["name"]: {
            "attached": entry["attachedRoutes"],
            **{c["type"]: (c["status"], c["reason"]) for c in entry["conditions"]},
        }
        for entry in (obj or {}).get("status", {}).get("listeners", [])
    }


async def test_a_listener_set_is_served_on_its_gateway_while_the_gateway_allows_it(
    env: Env,
) -> None:
    gateway = gateway_obj("one", http_listener("web", hostname="gw.example"))
    gateway["spec"]["allowedListeners"] = {"namespaces": {"from": "Same"}}
    listener_set = listener_set_obj(
        "team",
        "one",
        http_listener("app", hostname="app.example"),
        # The Gateway's port and hostname: refused, the Gateway's listener comes first.
        http_listener("web", hostname="gw.example"),
    )
    set_ref = {"group": GROUP, "kind": "ListenerSet", "name": "team"}
    try:
        await env.cluster.apply(gateway)
        await env.cluster.apply(listener_set)
        await env.cluster.apply(route_obj("to-blue", [{"name": "one"}], "blue"))
        await env.cluster.apply(route_obj("to-green", [set_ref], "green"))
        address = await env.address("one")

        async def merged() -> bool:
            found = await env.read("ListenerSet", "team")
            states = listener_states(found)
            gateway_now = await env.read("Gateway", "one")
            gateway_status = (gateway_now or {}).get("status", {})
            route = await env.parent_conditions("to-green", "team")
            return (
                conditions(found)
                == {"Accepted": ("True", "ListenersNotValid"), "Programmed": ("True", "Programmed")}
                and states.get("app", {}).get("Programmed") == ("True", "Programmed")
                and states["app"]["attached"] == 1
                and states.get("web", {}).get("Conflicted") == ("True", "HostnameConflict")
                and states["web"]["Accepted"] == ("False", "HostnameConflict")
                and states["web"]["attached"] == 0
                and gateway_status.get("attachedListenerSets") == 1
                and listener_states(gateway_now).get("web", {}).get("attached") == 1
                and route.get("Accepted") == ("True", "Accepted")
                and await env.backend_of(address, "app.example") == "green"
                and await env.backend_of(address, "gw.example") == "blue"
            )

        await eventually(merged, message="the ListenerSet's listener serves beside the Gateway's")

        gateway["spec"]["allowedListeners"] = {"namespaces": {"from": "None"}}
        await env.cluster.apply(gateway)

        async def refused() -> bool:
            found = await env.read("ListenerSet", "team")
            gateway_now = await env.read("Gateway", "one")
            route = await env.parent_conditions("to-green", "team")
            return (
                conditions(found)
                == {"Accepted": ("False", "NotAllowed"), "Programmed": ("False", "NotAllowed")}
                and (gateway_now or {}).get("status", {}).get("attachedListenerSets") == 0
                and route.get("Accepted", ("", ""))[0] == "False"
                and await env.backend_of(address, "app.example") == 404
                and await env.backend_of(address, "gw.example") == "blue"
            )

        await eventually(refused, message="a Gateway that stops admitting it stops serving it")
    finally:
        found = await env.read("ListenerSet", "team")
        if found is not None:
            await env.cluster.delete(found)


async def test_a_listener_set_https_listener_is_served_with_its_own_certificate(env: Env) -> None:
    gateway_secret, gateway_cert = self_signed_secret("gateway-cert", "gw.example")
    team_secret, team_cert = self_signed_secret("team-cert", "team.example")
    gateway = gateway_obj("one", https_listener("secure", "gw.example", {"name": "gateway-cert"}))
    gateway["spec"]["allowedListeners"] = {"namespaces": {"from": "Same"}}
    listener_set = listener_set_obj(
        "team", "one", https_listener("team", "team.example", {"name": "team-cert"})
    )
    set_ref = {"group": GROUP, "kind": "ListenerSet", "name": "team"}
    try:
        for obj in (gateway_secret, team_secret, gateway, listener_set):
            await env.cluster.apply(obj)
        await env.cluster.apply(route_obj("to-blue", [{"name": "one"}], "blue"))
        await env.cluster.apply(route_obj("to-green", [set_ref], "green"))
        address = await env.address("one")

        async def served() -> bool:
            # Each client trusts one certificate only: the server name chose the listener.
            return (
                await https_backend(env, address, "team.example", team_cert) == "green"
                and await https_backend(env, address, "gw.example", gateway_cert) == "blue"
            )

        await eventually(served, message="the ListenerSet's certificate serves its hostname")
    finally:
        found = await env.read("ListenerSet", "team")
        if found is not None:
            await env.cluster.delete(found)
