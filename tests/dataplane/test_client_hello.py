"""server_name(): the SNI of a real ClientHello (Python's ssl writes it), without one, cut
short, and bytes that are not TLS — never an exception."""

from __future__ import annotations

import ssl

import pytest
from hypothesis import given
from hypothesis import strategies as st

from interlock.dataplane.client_hello import NotTls, record_length, server_name


def client_hello(name: str | None) -> bytes:
    """The first flight of a TLS client asking for ``name`` (no SNI when None)."""
    context = ssl.create_default_context()
    if name is None:
        context.check_hostname = False
    outgoing = ssl.MemoryBIO()
    tls = context.wrap_bio(ssl.MemoryBIO(), outgoing, server_hostname=name)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def first_record(flight: bytes) -> bytes:
    length = record_length(flight[:5])
    assert isinstance(length, int)
    return flight[:length]


@pytest.mark.parametrize("name", ["db.example.com", "a.b.example.com"])
def test_the_server_name_of_a_real_client_hello(name: str) -> None:
    assert server_name(first_record(client_hello(name))) == name


def test_the_name_is_lower_case_without_a_final_dot() -> None:
    assert server_name(first_record(client_hello("DB.Example.COM."))) == "db.example.com"


def test_a_client_hello_without_server_name() -> None:
    assert server_name(first_record(client_hello(None))) is None


def test_bytes_that_are_not_tls() -> None:
    assert isinstance(record_length(b"GET / HTTP/1.1\r\n"), NotTls)
    assert isinstance(server_name(b"GET / HTTP/1.1\r\n\r\n"), NotTls)
    # A handshake record that does not hold a ClientHello.
    assert isinstance(server_name(b"\x16\x03\x01\x00\x04\x02\x00\x00\x00"), NotTls)


def test_a_record_cut_short_holds_no_name() -> None:
    record = first_record(client_hello("db.example.com"))
    header = record[:3] + (60).to_bytes(2, "big")
    assert server_name(header + record[5:65]) is None


@given(st.binary(max_size=300))
def test_any_bytes_are_a_name_none_or_not_tls(data: bytes) -> None:
    assert server_name(data) is None or isinstance(server_name(data), (str, NotTls))
