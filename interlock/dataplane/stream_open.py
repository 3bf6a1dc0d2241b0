"""The two I/O steps every TLS-by-server-name byte stream takes, for the mesh listener's
CONNECT tunnels (``interlock/mesh/tunnels.py``) and Gateway TLS passthrough listeners
(``interlock/edge/gateway_passthrough.py``): read the client's first TLS record (its
ClientHello, never decrypted: its server name chooses the route), and open a connection to one
of the chosen backend's endpoints (round robin and failure accrual are the engine's).
"""

from __future__ import annotations

import asyncio

from loguru import logger
from multidict import CIMultiDict

from interlock.dataplane.access_log import note_upstream
from interlock.dataplane.answers import (
    BAD_REQUEST,
    ENDPOINTS_FAILING,
    HEADER_TIMEOUT,
    UPSTREAM_UNREACHABLE,
    Answer,
    answer,
)
from interlock.dataplane.client_hello import RECORD_HEADER, NotTls, record_length, server_name
from interlock.dataplane.engine import MAX_ADDRESS_TRIES, NO_HOOKS, Engine
from interlock.dataplane.plan import Forward
from interlock.dataplane.splice import CHUNK

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def read_client_hello(
    client: asyncio.StreamReader, *, within: float, where: str
) -> bytes | Answer:
    """The client's first TLS record, whole and unchanged (to be forwarded as it came), or
    why there is none: not TLS, not in ``within`` seconds, the client closed first."""
    try:
        async with asyncio.timeout(within):
            header = await client.readexactly(RECORD_HEADER)
            length = record_length(header)
            if isinstance(length, NotTls):
                return answer(BAD_REQUEST, f"{where}: {length.reason}")
            return header + await client.readexactly(length - RECORD_HEADER)
    except TimeoutError:
        return answer(HEADER_TIMEOUT, f"{where}: no TLS ClientHello in time")
    except asyncio.IncompleteReadError:
        return answer(BAD_REQUEST, f"{where}: the client closed before its ClientHello")


async def read_server_name(
    client: asyncio.StreamReader, *, within: float, where: str
) -> tuple[bytes, str | None] | Answer:
    """The client's first TLS record (:func:`read_client_hello`) and the server name in it
    (None: it names none), or why there is none."""
    hello = await read_client_hello(client, within=within, where=where)
    if isinstance(hello, Answer):
        return hello
    name = server_name(hello)
    if isinstance(name, NotTls):
        return answer(BAD_REQUEST, f"{where}: {name.reason}")
    return hello, name


async def open_stream(
    engine: Engine, decision: Forward, *, where: str, connect_timeout: float
) -> Streams | Answer:
    """A connection to one of the decision's endpoints: round robin from the next one,
    without those failure accrual took out, up to three tried."""
    prepared = engine.prepare(decision, CIMultiDict(), NO_HOOKS)
    if isinstance(prepared, Answer):
        return prepared
    candidates = engine.candidates(decision, prepared[0])
    if not candidates:
        return answer(ENDPOINTS_FAILING, f"{decision.target.describe()}: every endpoint is failing")
    failed = answer(UPSTREAM_UNREACHABLE, f"{where}: no endpoint could be tried")
    for address in candidates[:MAX_ADDRESS_TRIES]:
        note_upstream(*address)
        try:
            async with asyncio.timeout(connect_timeout):
                opened = await asyncio.open_connection(*address, limit=CHUNK)
        except (OSError, TimeoutError) as error:
            logger.debug("{}: cannot connect to {}: {!r}", where, address, error)
            engine.record(decision, address, failed=True)
            failed = answer(UPSTREAM_UNREACHABLE, f"{where}: cannot connect to {address}")
            continue
        engine.record(decision, address, failed=False)
        return opened
    return failed
