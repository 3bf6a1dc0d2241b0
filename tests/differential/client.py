"""A small blocking HTTP client that sends one corpus request to one API server.

The corpus compares what a client sees, so it talks HTTP itself (``http.client``) instead of
through kubernetes-asyncio, whose models would hide fields and defaults: the status line, the
``Warning`` headers, the JSON body and — for watches — the event lines, read until the case has
seen as many events as it asks for.
"""

from __future__ import annotations

import http.client
import json
import ssl
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

JSON = "application/json"


@dataclass(frozen=True)
class Target:
    """One API server: where it is and how to authenticate."""

    name: str
    url: str
    token: str | None = None
    ca_file: str | None = None

    def connection(self, timeout: float) -> http.client.HTTPConnection:
        parts = urlsplit(self.url)
        host, port = parts.hostname or "127.0.0.1", parts.port
        if parts.scheme == "https":
            context = ssl.create_default_context(cafile=self.ca_file)
            return http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
        return http.client.HTTPConnection(host, port, timeout=timeout)


@dataclass
class Response:
    status: int
    warnings: list[str] = field(default_factory=list)
    body: Any = None
    events: list[Any] | None = None


def _warnings(message: http.client.HTTPResponse) -> list[str]:
    """The text of each ``Warning: 299 - "text"`` header, in order."""
    texts = []
    for value in message.headers.get_all("Warning") or []:
        text = value.split(" ", 2)[-1].strip()
        if text.startswith('"') and text.endswith('"'):
            text = text[1:-1].replace('\\"', '"')
        texts.append(text)
    return texts


def send(
    target: Target,
    *,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = JSON,
    accept: str = JSON,
    watch_events: int | None = None,
    watch_until_bookmark: bool = False,
    timeout: float = 30.0,
) -> Response:
    """Send one request; a watch is read until ``watch_events`` events (or the stream's end)."""
    headers = {"Accept": accept, "User-Agent": "interlock-differential"}
    if target.token:
        headers["Authorization"] = f"Bearer {target.token}"
    payload: bytes | None = None
    if body is not None:
        payload = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        headers["Content-Type"] = content_type
    connection = target.connection(timeout)
    try:
        connection.request(method, path, body=payload, headers=headers)
        message = connection.getresponse()
        warnings = _warnings(message)
        if watch_events is None and not watch_until_bookmark:
            raw = message.read()
            return Response(message.status, warnings, _decode(raw))
        if message.status != 200:
            return Response(message.status, warnings, _decode(message.read()))
        return Response(
            message.status,
            warnings,
            None,
            _read_events(
                message,
                count=watch_events,
                until_bookmark=watch_until_bookmark,
                deadline=time.monotonic() + timeout,
            ),
        )
    finally:
        connection.close()


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def _read_events(
    message: http.client.HTTPResponse, *, count: int | None, until_bookmark: bool, deadline: float
) -> list[Any]:
    """Watch events in order; BOOKMARKs are kept only when the case waits for one."""
    events: list[Any] = []
    seen = 0
    while time.monotonic() < deadline:
        try:
            line = message.readline()
        except TimeoutError:
            break
        if not line:
            break
        if not line.strip():
            continue
        event = json.loads(line)
        if event.get("type") == "BOOKMARK":
            annotations = (event.get("object") or {}).get("metadata", {}).get("annotations") or {}
            if until_bookmark and annotations.get("k8s.io/initial-events-end") == "true":
                events.append({"type": "BOOKMARK", "initialEventsEnd": True})
                break
            continue
        events.append(event)
        seen += 1
        if count is not None and seen >= count:
            break
    return events
