"""On a route without ingressNginx, mutualTLS or oauth/oidc, a request's headers start from the
list the HTTP/1.1 server sorted while parsing (``H2Request.forwardable``, without
``steps.HELD_BACK`` and the hop-by-hop names): the upstream gets the same names with the same
values, in the same order per name, as the general rules give (``without_hop_by_hop``,
``Expect`` and ``Host``, the identity headers' removal, a headers module's changes,
``set_forwarded_headers``), whatever names, cases and repeats the client sends. A
``Connection`` header that lists names, or a request without ``Host``, is left to the general
rules."""

from __future__ import annotations

import dataclasses

import pytest
from multidict import CIMultiDict

from interlock.dataplane.request_stream import H2Request
from interlock.edge.steps import Admitted, decide
from interlock.model.moduleset import Modules
from tests.kit.http1_parsing import parsed_requests

from .conftest import HOST, EdgeHarness

SPOOFED = (
    "X-Forwarded-For: 6.6.6.6\r\nx-forwarded-PROTO: https\r\nX-Forwarded-Host: evil\r\n"
    "Forwarded: for=6.6.6.6\r\nX-Real-IP: 6.6.6.6\r\nTrue-Client-IP: 6.6.6.6\r\n"
    "x-client-ip: 6.6.6.6\r\nX-Cluster-Client-IP: 6.6.6.6\r\nCF-Connecting-IP: 6.6.6.6\r\n"
    "Fastly-Client-IP: 6.6.6.6\r\nX-Client-Cert-Subject: CN=admin\r\n"
    "x-client-cert-san: DNS:admin\r\nX-Client-Cert-Fingerprint: 00\r\n"
    "X-Forwarded-User: admin\r\nX-FORWARDED-EMAIL: admin@example.com\r\n"
)
HOP_BY_HOP = (
    "Keep-Alive: timeout=5\r\nTE: trailers\r\nTrailer: X-Sum\r\nUpgrade-Insecure: 1\r\n"
    "Proxy-Authorization: Basic eDp5\r\nproxy-whatever: 1\r\nPROXY-Connection: keep-alive\r\n"
    "Expect: 100-continue\r\n"
)
KEPT = "X-Repeated: 1\r\nUser-Agent: test\r\nx-repeated: 2\r\nAccept: */*\r\nX-Proxyish: 1\r\n"

HEADS = {
    "plain": f"GET /a?b=c HTTP/1.1\r\nHost: {HOST}\r\n{KEPT}\r\n",
    "spoofed": f"GET / HTTP/1.1\r\n{SPOOFED}Host: {HOST}\r\n{KEPT}\r\n",
    "hop-by-hop": f"POST / HTTP/1.1\r\nHost: {HOST}\r\n{HOP_BY_HOP}{KEPT}Content-Length: 0\r\n\r\n",
    "two hosts": f"GET / HTTP/1.1\r\nhost: {HOST}\r\n{KEPT}HOST: other.example\r\n\r\n",
    "connection close": f"GET / HTTP/1.1\r\nHost: {HOST}\r\n{KEPT}Connection: Close\r\n\r\n",
    "connection keep-alive": (
        f"GET / HTTP/1.0\r\nHost: {HOST}\r\nConnection: keep-alive\r\n{KEPT}\r\n"
    ),
    "a header named close": f"GET / HTTP/1.1\r\nHost: {HOST}\r\n{KEPT}Close: 1\r\n\r\n",
}


async def _parsed(head: str) -> H2Request:
    """``head`` as the edge's HTTP/1.1 server hands it to the steps."""
    return (await parsed_requests(head.encode()))[0]


def _by_name(headers: CIMultiDict[str]) -> dict[str, list[str]]:
    return {name.lower(): headers.getall(name) for name in headers}


async def _upstream_headers(harness: EdgeHarness, request: H2Request) -> dict[str, list[str]]:
    decided = await decide(harness.server.front, request, None)
    assert isinstance(decided, Admitted), decided
    return _by_name(decided.headers)


CHANGES = {
    "no modules": None,
    "checks and header changes": Modules.model_validate(
        {
            "ipRestriction": {"allow": ["0.0.0.0/0"]},
            "headers": {
                "request": {
                    "add": {
                        "X-Team": "blue",
                        "x-repeated": "3",
                        "X-Real-IP": "10.0.0.1",
                        "X-Forwarded-For": "10.0.0.1",
                        "X-Forwarded-User": "operator",
                    },
                    "remove": ["User-Agent", "x-client-ip"],
                }
            },
        }
    ),
    "checks and header changes of other names": Modules.model_validate(
        {
            "ipRestriction": {"allow": ["0.0.0.0/0"]},
            "headers": {
                "request": {
                    "add": {"X-Team": "blue", "x-repeated": "3"},
                    "remove": ["User-Agent", "x-client-ip"],
                }
            },
        }
    ),
}
"""A route without modules, one with a check and a headers module (which may set what the
client may not: the headers module is the operator's), and one whose headers module sets no
name ``steps.HELD_BACK`` holds (the X-Forwarded-* names are then added, not set)."""


@pytest.mark.parametrize("modules", CHANGES.values(), ids=CHANGES.keys())
@pytest.mark.parametrize("head", HEADS.values(), ids=HEADS.keys())
async def test_sorted_headers_are_those_the_general_rules_leave(
    harness: EdgeHarness, head: str, modules: Modules | None
) -> None:
    await harness.serve(modules=modules)
    request = await _parsed(head)
    assert request.forwardable is not None
    sorted_out = await _upstream_headers(harness, request)
    general = await _upstream_headers(harness, dataclasses.replace(request, forwardable=None))
    assert sorted_out == general
    assert sorted_out["x-forwarded-for"] == ["127.0.0.1"]
    assert sorted_out["host"] == [HOST]


@pytest.mark.parametrize(
    "head",
    [
        f"GET / HTTP/1.1\r\nHost: {HOST}\r\nConnection: X-Repeated\r\n{KEPT}\r\n",
        f"GET / HTTP/1.1\r\nHost: {HOST}\r\nConnection: close, te\r\n{KEPT}\r\n",
        f"GET / HTTP/1.1\r\nHost: {HOST}\r\nClose: 1\r\nConnection: close\r\n{KEPT}\r\n",
        f"GET / HTTP/1.0\r\n{KEPT}\r\n",
    ],
    ids=["connection lists names", "connection lists two", "close names a header", "no host"],
)
async def test_a_request_the_server_cannot_sort_is_left_to_the_general_rules(head: str) -> None:
    assert (await _parsed(head)).forwardable is None
