"""The provider for a data plane in another process: :class:`HttpEdge`, a client of ``admin_api``.

Edge actors cannot tell it from :class:`~interlock.edge.inprocess.InProcessEdge` except through
the ways a network fails, which this client folds into the two error classes actors understand:

* a 4xx answer (422 invalid modules, 400 unreadable request, 404 …) → :class:`PermanentEdgeError`
  — sending the same request again cannot succeed;
* 429, a 5xx answer, a timeout or a broken connection → :class:`TransientEdgeError`, carrying
  ``Retry-After`` (seconds or an HTTP date) when the data plane sent one.

Secrets travel base64 in the request body, over the admin address the operator chose; the
client never logs bodies, and errors quote only the data plane's own message. Every call carries
the admin API's token (``Authorization: Bearer``), which appears in no log line or error.
"""

from __future__ import annotations

import base64
import json
import ssl
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from types import TracebackType
from typing import Any
from urllib.parse import quote

import aiohttp
from yarl import URL

from interlock.edge.provider import (
    ApplyModules,
    BackendTarget,
    EdgeSnapshot,
    PermanentEdgeError,
    TransientEdgeError,
)
from interlock.model.moduleset import SecretValue
from interlock.model.upstream_table import TableChanges, changes_json


def parse_retry_after(value: str | None, *, now: Callable[[], float] = time.time) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now())


class HttpEdge:
    """An :class:`~interlock.edge.provider.EdgeProvider` calling a data plane's admin API.

    ``base_url`` is ``http://HOST:PORT`` of the admin API; ``token`` the one it requires (see
    :mod:`~interlock.edge.admin_api`); ``timeout`` bounds each call. ``ca_file``: the PEM
    certificates an ``https://`` admin API's certificate is verified against (``interlock run
    --edge-admin-ca``) instead of the system's; read at once (``OSError``/``ssl.SSLError``).
    """

    def __init__(
        self,
        *,
        base_url: str,
        token: SecretValue | None,
        timeout: float = 10.0,
        session: aiohttp.ClientSession | None = None,
        ca_file: str | None = None,
    ) -> None:
        self._tls = None if ca_file is None else ssl.create_default_context(cafile=ca_file)
        self._base = URL(base_url.rstrip("/"))
        self._headers = (
            {} if token is None else {"Authorization": "Bearer " + token.reveal().decode()}
        )
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session = session
        self._owns_session = session is None

    async def __aenter__(self) -> HttpEdge:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None

    async def apply_modules(self, command: ApplyModules) -> None:
        body = {
            "path": command.path,
            "pathType": command.path_type,
            "modules": command.modules.model_dump(by_alias=True, exclude_none=True, mode="json"),
            "secrets": [
                {"name": name, "key": key, "value": base64.b64encode(value.reveal()).decode()}
                for (name, key), value in sorted(command.secrets.items())
            ],
        }
        await self._call("PUT", self._route(command.host, command.route_id, "modules"), body=body)

    async def attach_backend(self, *, host: str, route_id: str, backend: BackendTarget) -> None:
        await self._call("PUT", self._route(host, route_id, "backend"), body=backend.to_json())

    async def detach_backend(self, *, host: str, route_id: str) -> None:
        await self._call("DELETE", self._route(host, route_id, "backend"))

    async def remove_route(self, *, host: str, route_id: str) -> None:
        await self._call("DELETE", self._route(host, route_id, None))

    async def set_tls(
        self, *, host: str, cert_pem: SecretValue | None, key_pem: SecretValue | None
    ) -> None:
        body = {
            "certPem": None if cert_pem is None else base64.b64encode(cert_pem.reveal()).decode(),
            "keyPem": None if key_pem is None else base64.b64encode(key_pem.reveal()).decode(),
        }
        url = self._base.with_path(f"/v1/hosts/{_segment(host)}/tls", encoded=True)
        await self._call("PUT", url, body=body)

    async def push_upstreams(self, changes: TableChanges, *, epoch: str | None = None) -> str:
        """Send upstream tables to an edge started with ``--pushed-upstreams``: ``PUT`` when
        ``changes`` replace what it holds, else ``PATCH`` of the table of ``epoch``; returns the
        epoch of the table it now holds. :class:`TableReplaced` when the edge holds another."""
        method = "PUT" if changes.replace else "PATCH"
        body = {**changes_json(changes), "epoch": epoch}
        answer = await self._call(method, self._base.with_path("/v1/upstreams"), body=body)
        if not isinstance(answer, dict) or not isinstance(answer.get("epoch"), str):
            raise TransientEdgeError(f"{method} /v1/upstreams: the answer names no epoch")
        return str(answer["epoch"])

    async def instance(self) -> str:
        """The name the data plane drew when it started (``GET /v1/instance``): another one
        than before means it restarted and holds nothing it was told."""
        answer = await self._call("GET", self._base.with_path("/v1/instance"))
        if not isinstance(answer, dict) or not isinstance(answer.get("instance"), str):
            raise TransientEdgeError("GET /v1/instance: the answer names no instance")
        return str(answer["instance"])

    async def snapshot(self) -> EdgeSnapshot:
        data = await self._call("GET", self._base.with_path("/v1/snapshot"))
        try:
            return EdgeSnapshot.from_json(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise TransientEdgeError(
                f"snapshot from {self._base}: unreadable answer ({exc})"
            ) from None

    def _route(self, host: str, route_id: str, part: str | None) -> URL:
        path = f"/v1/hosts/{_segment(host)}/routes/{_segment(route_id)}"
        if part is not None:
            path += f"/{part}"
        return self._base.with_path(path, encoded=True)

    async def _call(self, method: str, url: URL, *, body: object = None) -> Any:
        what = f"{method} {url.path}"
        if self._session is None:
            connector = None if self._tls is None else aiohttp.TCPConnector(ssl=self._tls)
            self._session = aiohttp.ClientSession(connector=connector)
        try:
            async with self._session.request(
                method, url, json=body, headers=self._headers, timeout=self._timeout
            ) as response:
                text = await response.text()
                if response.status < 300:
                    return json.loads(text) if response.status == 200 else None
                retry_after = parse_retry_after(response.headers.get("Retry-After"))
                message = f"edge admin API {what}: {response.status}: {_error_text(text)}"
        except TimeoutError:
            raise TransientEdgeError(f"edge admin API {what}: timed out") from None
        except aiohttp.ClientError as exc:
            raise TransientEdgeError(
                f"edge admin API {what}: {type(exc).__name__}: {exc}"
            ) from None
        if response.status == 429 or response.status >= 500:
            raise TransientEdgeError(message, retry_after=retry_after)
        if response.status == 412:
            raise TableReplaced(message)
        raise PermanentEdgeError(message)


class TableReplaced(TransientEdgeError):
    """A ``PATCH /v1/upstreams`` named a table the edge no longer holds (it restarted): send
    it whole (retried at once by the pusher; transient if it escapes)."""


def _segment(value: str) -> str:
    return quote(value, safe="")


def _error_text(text: str) -> str:
    """The data plane's ``error`` message, or the start of an unexpected body."""
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip()[:200]
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return str(data["error"])
    return text.strip()[:200]
