"""What reading the ClientHello first costs: new TLS connections per second through the edge's
``TlsListener`` against asyncio's own TLS server (``loop.create_server(ssl=context)``), both
serving the same certificate and a protocol that answers one line and closes.

The edge reads the server name before the handshake so that each host's TLS context (and so
whether a client certificate is asked for: mutualTLS) applies to its own connections only
(``interlock/edge/tls_listener.py``). The extra work per connection is a readiness wait, one
``recv(MSG_PEEK)`` and parsing the ClientHello in Python. Rounds alternate the two servers in one
process, so drift on a shared machine hits both alike; the figure is the median over rounds and
the ratio is taken within the same run.

    .venv/bin/python benchmarks/tls_accept.py [--rounds 5] [--connections 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from interlock.edge.tls_listener import TlsListener
from tests.kit.tls_certs import self_signed

HOST = "bench.example"


class OneLine(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        transport.write(b"ok\n")
        transport.close()


async def connections_per_second(port: int, trust: ssl.SSLContext, count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=trust, server_hostname=HOST
        )
        assert await reader.readline() == b"ok\n"
        writer.close()
    return count / (time.perf_counter() - start)


async def main(rounds: int, count: int) -> None:
    cert, key = self_signed(HOST)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "pair.pem").write_text(cert + key)
        context.load_cert_chain(Path(folder) / "pair.pem")
    trust = ssl.create_default_context(cadata=cert)
    loop = asyncio.get_running_loop()
    plain = await loop.create_server(OneLine, "127.0.0.1", 0, ssl=context)
    plain_port = plain.sockets[0].getsockname()[1]
    listener = TlsListener(protocol_factory=OneLine, context_for=lambda _: context, timeout=10)
    _, ours_port = await listener.start("127.0.0.1", 0)
    figures: dict[str, list[float]] = {"asyncio create_server(ssl=…)": [], "TlsListener": []}
    try:
        for _ in range(rounds):
            for name, port in (
                ("asyncio create_server(ssl=…)", plain_port),
                ("TlsListener", ours_port),
            ):
                figures[name].append(await connections_per_second(port, trust, count))
    finally:
        plain.close()
        await listener.close()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()},"
        f" {ssl.OPENSSL_VERSION}; load average {os.getloadavg()[0]:.1f}"
    )
    print(f"{rounds} rounds x {count} sequential connections (handshake + one line), medians:")
    medians = {name: statistics.median(values) for name, values in figures.items()}
    for name, value in medians.items():
        print(f"  {name:30} {value:8.0f} connections/s")
    ratio = medians["TlsListener"] / medians["asyncio create_server(ssl=…)"]
    print(f"  TlsListener / asyncio: {ratio:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=200)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.rounds, arguments.connections))
