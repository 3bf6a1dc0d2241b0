"""The mesh listener relays header names that hold ``_`` as the client sent them; the edge drops
them (``test_wire_headers.py``). On purpose, and docs/mesh.md says why: the edge drops
``X_Client_Cert_Subject`` because a CGI, WSGI, PHP or Rack backend reads it as the
``X-Client-Cert-Subject`` the edge sets from a verified certificate. The mesh listener runs no
modules and vouches for no header: its clients are in the cluster, and the ``X-Client-Cert-Subject``
spelling itself reaches the backend through it as sent. Dropping the ``_`` spelling would protect
nothing there and break in-cluster clients whose header names hold ``_``. If the mesh listener
ever sets a header a backend trusts, this test is where that decision changes.
"""

from __future__ import annotations

import json

from tests.kit.h2_raw import H2Raw
from tests.kit.mesh_listener import AUTHORITY, running_mesh
from tests.kit.raw_http1 import send_raw

from .conftest import get_request

SENT = {"x_client_cert_subject": "CN=admin", "x-client-cert-subject": "CN=admin", "x-plain": "p"}


async def test_http1_headers_reach_the_backend_as_sent(header_backend: tuple[str, int]) -> None:
    extra = "".join(f"{name}: {value}\r\n" for name, value in SENT.items())
    async with running_mesh(header_backend) as mesh:
        answer = await send_raw(mesh, get_request("/", host=AUTHORITY, extra=extra))
    assert answer.status == 200, answer.raw[:300]
    seen = json.loads(answer.body)
    assert {name: seen.get(name) for name in SENT} == {n: [v] for n, v in SENT.items()}


async def test_http2_headers_reach_the_backend_as_sent(header_backend: tuple[str, int]) -> None:
    async with running_mesh(header_backend) as mesh:
        client = await H2Raw.open(mesh)
        try:
            status, _, body = await client.request(
                [
                    (":method", "GET"),
                    (":scheme", "http"),
                    (":authority", AUTHORITY),
                    (":path", "/"),
                    *SENT.items(),
                ]
            )
        finally:
            client.close()
    assert status == 200, body[:300]
    seen = json.loads(body)
    assert {name: seen.get(name) for name in SENT} == {n: [v] for n, v in SENT.items()}
