"""The demo's live trace: one line per handled message, naming the external event behind it."""

from __future__ import annotations

import asyncio
import io
import json
import socket

from interlock.config import Address
from interlock.demo.endpoints import endpoint_slice
from interlock.demo.live_trace import LiveTrace, TraceTee, short_address
from interlock.demo.runner import available
from interlock.mailbox import Actor, ActorSystem, Tracer


class Forwarder(Actor):
    """Passes every message on to ``sink/one``, as a directory passes changes to a route."""

    async def receive(self, message: object) -> None:
        self.tell("sink/default/one", f"forwarded {message}")


class Sink(Actor):
    async def receive(self, message: object) -> None:
        return None


async def test_each_handled_message_is_printed_with_its_external_event() -> None:
    printed: list[str] = []
    file = io.StringIO()
    tee = TraceTee(file, live=LiveTrace(out=printed.append))
    system = ActorSystem(tracer=Tracer(write=tee.write))
    system.spawn("router", Forwarder)
    system.spawn("sink/default/one", Sink)
    system.tell("router", "change", correlation_id="Upserted Service default/echo-v2 rv=7")
    deadline = asyncio.get_running_loop().time() + 5
    while not any("forwarded change" in line for line in printed):
        assert asyncio.get_running_loop().time() < deadline, printed
        await asyncio.sleep(0.01)
        tee.drain()
    await system.shutdown()

    (root,) = [line for line in printed if "  router  " in line]
    assert root.endswith("<= external event")
    (caused,) = [line for line in printed if "forwarded change" in line]
    assert "sink/default/one" in caused
    assert caused.endswith("<= Upserted Service default/echo-v2 rv=7")
    # The file holds the same records as JSON lines, for `interlock trace`.
    records = [json.loads(line) for line in file.getvalue().splitlines()]
    assert {"deliver", "handled"} <= {record["event"] for record in records}


def test_quiet_trace_still_writes_the_file_and_ignores_non_records() -> None:
    file = io.StringIO()
    tee = TraceTee(file, live=None)
    tee.write('{"ts": "2026-01-01T00:00:00Z", "event": "spawned"}\n')
    tee.drain()
    assert file.getvalue().count("\n") == 1
    printed: list[str] = []
    live = LiveTrace(out=printed.append)
    live.feed("not json")
    live.feed('["a list"]')
    assert printed == []


def test_failures_and_dead_letters_are_printed_as_such() -> None:
    printed: list[str] = []
    live = LiveTrace(out=printed.append)
    head = '"ts":"2026-01-01T00:00:00.000001Z","correlation_id":"Deleted Service default/x rv=3"'
    live.feed(
        f'{{{head},"event":"deliver","id":"1","causation_id":null,"sender":"external",'
        '"recipient":"router","type":"ObjectChanged","summary":"Deleted Service default/x rv=3"}'
    )
    live.feed(
        f'{{{head},"event":"failed","id":"2","causation_id":"1","sender":"router",'
        '"recipient":"route/g/default/web","type":"Published","summary":"Published(topic=\'s\', '
        'key=\'k\', value=1)","duration_ms":1.5,"error_type":"KeyError","error":"x"}'
    )
    live.feed(
        f'{{{head},"event":"dead_letter","id":"3","causation_id":"1","sender":"router",'
        '"recipient":"gone","type":"Ping","summary":"Ping()","reason":"unknown"}'
    )
    assert "Published s [k]" in printed[0]
    assert "FAILED KeyError: x" in printed[0]
    assert printed[0].endswith("<= Deleted Service default/x rv=3")
    assert "dead letter (unknown)" in printed[1]


def test_long_actor_addresses_show_kind_and_object() -> None:
    assert short_address("route/gateway.networking.k8s.io/default/web") == "route/default/web"
    assert short_address("watch/default/web/80/shop") == "watch/default/web/80/shop"
    assert short_address("status-writer") == "status-writer"


def test_a_busy_friendly_port_falls_back_to_a_free_one() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        chosen = available(Address("127.0.0.1", port))
    assert chosen.host == "127.0.0.1"
    assert chosen.port not in (0, port)
    assert available(Address("127.0.0.1", 0)).port != 0


def test_endpoint_slices_name_their_service_and_the_service_port_name() -> None:
    slice_ = endpoint_slice(namespace="default", service="echo-v1", host="127.0.0.1", port=4242)
    assert slice_["metadata"]["labels"]["kubernetes.io/service-name"] == "echo-v1"
    assert slice_["ports"] == [{"name": "http", "port": 4242, "protocol": "TCP"}]
    assert slice_["endpoints"] == [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}]


def test_start_up_lines_discarded_and_shutdown_muted_stay_in_the_file() -> None:
    file = io.StringIO()
    printed: list[str] = []
    tee = TraceTee(file, live=LiveTrace(out=printed.append))
    head = '"ts":"2026-01-01T00:00:00.000001Z","correlation_id":"c","causation_id":null'
    line = f'{{{head},"event":"handled","id":"1","sender":"external","recipient":"r","type":"T"}}\n'
    tee.write(line)
    assert tee.pending == 1
    tee.discard_pending()
    tee.drain()
    assert printed == []
    tee.write(line)
    tee.drain()
    assert len(printed) == 1, "a line after the banner is printed"
    tee.mute()
    tee.write(line)
    tee.drain()
    assert len(printed) == 1
    assert file.getvalue().count("\n") == 3, "the file keeps every line"
