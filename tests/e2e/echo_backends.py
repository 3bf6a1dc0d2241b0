"""What the end-to-end tests' echo backends share: their report, the slice that points a
Service at them, and the answer a data plane relays from them.

An echo backend answers every request with what reached it (``X-Echo`` names the backend),
so a test sees what the edge or the mesh listener forwarded; its endpoint is a local server
(``ENDPOINT_HOST``) that an EndpointSlice names as a pod's would be.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from lanes import ENDPOINT_HOST


def request_report(backend: str, request: web.Request, *, every_value: bool) -> dict[str, Any]:
    """What an echo backend answers: its name and the request's method, raw path, query and
    headers by lower-cased name (with ``every_value``, a list of each header's values)."""
    headers: dict[str, Any] = (
        {k.lower(): request.headers.getall(k) for k in request.headers}
        if every_value
        else {k.lower(): v for k, v in request.headers.items()}
    )
    return {
        "backend": backend,
        "method": request.method,
        "path": request.raw_path.partition("?")[0],
        "query": request.query_string,
        "headers": headers,
    }


def local_slice(
    service: str, ports: dict[str, int], *, name: str, namespace: str = "default"
) -> dict[str, Any]:
    """An EndpointSlice of ``service`` with one ready endpoint on this machine
    (``ENDPOINT_HOST``), serving each named Service port at the local port given."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [ENDPOINT_HOST], "conditions": {"ready": True}}],
        "ports": [
            {"name": port_name, "port": port, "protocol": "TCP"}
            for port_name, port in ports.items()
        ],
    }


@dataclass(frozen=True)
class EchoReply:
    """An answer from a data plane (the edge or the mesh listener) in front of echo backends."""

    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def echo(self) -> dict[str, Any]:
        """The backend's report (fails when the data plane answered itself)."""
        assert "X-Echo" in self.headers, (self.status, self.headers, self.body[:300])
        report: dict[str, Any] = json.loads(self.body)
        return report
