"""A transport standing in for a socket under a data plane protocol: it keeps what the protocol
writes and whether it closed the connection (the HTTP/1.1 server's unit tests)."""

from __future__ import annotations

import asyncio


class RecordingTransport(asyncio.Transport):
    """What the protocol writes, and whether it closed the connection."""

    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += bytes(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 1) if name == "peername" else default

    def pause_reading(self) -> None:
        return None

    def resume_reading(self) -> None:
        return None
