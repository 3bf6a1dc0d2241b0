"""What HTTP/2's server and client sides share: the connection preface, the header rules, and
a connection's h2 state with its writing and flow control (:class:`FlowControlledConnection`).

The protocol work is python-hyper's ``h2``: a sans-I/O HTTP/2 state machine (framing, HPACK,
flow control, stream states, the RFC 9113 header rules) that is the HTTP/2 core of hypercorn and
httpx, well kept and small. What is ours is the I/O around it: the server side
(``http2_server.py``: client connections) and the client side (``http2_client.py``: h2c to
upstreams) each drive one :class:`FlowControlledConnection`, so a stream's data goes out as the
peer's windows allow on both, by the same code.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import h2.config
import h2.connection

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

_CONNECTION_SPECIFIC = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
        "host",
        "http2-settings",
    }
)
"""Headers HTTP/2 forbids (RFC 9113 §8.2.2; ``Host`` travels as ``:authority``)."""

Headers = list[tuple[str, str]]


def regular_headers(headers: Iterable[tuple[str, str]]) -> Headers:
    """``headers`` without pseudo-headers and connection-specific ones (``te`` only as
    ``trailers``), names in lower case."""
    kept: Headers = []
    for name, value in headers:
        lower = name.lower()
        if lower.startswith(":") or lower in _CONNECTION_SPECIFIC:
            continue
        if lower == "te" and value.strip().lower() != "trailers":
            continue
        kept.append((lower, value))
    return kept


def decode_headers(headers: Iterable[tuple[bytes | str, bytes | str]]) -> Headers:
    return [
        (
            k.decode("latin-1") if isinstance(k, bytes) else k,
            v.decode("latin-1") if isinstance(v, bytes) else v,
        )
        for k, v in headers
    ]


class FlowControlledConnection:
    """What server and client connections share: the h2 state, writing, flow control."""

    def __init__(self, *, client_side: bool) -> None:
        self.h2 = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=client_side, header_encoding=None)
        )
        self.transport: asyncio.Transport | None = None
        self._window_open = asyncio.Event()
        self.closed = False

    def flush(self) -> None:
        data = self.h2.data_to_send()
        transport = self.transport
        if data and not self.closed and transport is not None and not transport.is_closing():
            transport.write(data)

    def window_changed(self) -> None:
        self._window_open.set()
        self._window_open = asyncio.Event()

    async def send_data(self, stream_id: int, data: bytes, *, end: bool) -> None:
        """Send ``data`` as the stream's and the connection's windows allow."""
        view = memoryview(data)
        while view:
            if self.closed:
                raise ConnectionError("the HTTP/2 connection closed")
            window = min(
                self.h2.local_flow_control_window(stream_id), self.h2.max_outbound_frame_size
            )
            if window <= 0:
                await self._window_open.wait()
                continue
            self.h2.send_data(stream_id, bytes(view[:window]))
            view = view[window:]
            self.flush()
        if end:
            self.h2.end_stream(stream_id)
            self.flush()

    def close_all(self) -> None:
        self.closed = True
        self._window_open.set()
