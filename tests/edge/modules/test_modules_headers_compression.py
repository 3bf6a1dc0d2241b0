"""headers (request and response add/remove) and the compression policy."""

from __future__ import annotations

from typing import Any

import pytest
from multidict import CIMultiDict

from interlock.edge.modules import ModuleChain, ModuleConfigError, compile_modules, should_compress
from tests.kit.modules_testkit import modules


def chain(raw: dict[str, Any]) -> ModuleChain:
    return compile_modules(modules(raw), {})


HEADERS = {
    "headers": {
        "request": {"add": {"X-Team": "blue"}, "remove": ["X-Debug"]},
        "response": {"add": {"X-Frame-Options": "DENY"}, "remove": ["Server"]},
    }
}


def test_request_headers_added_and_removed() -> None:
    outgoing = CIMultiDict(
        [("x-debug", "1"), ("X-DEBUG", "2"), ("x-team", "forged"), ("Accept", "*/*")]
    )
    chain(HEADERS).upstream_request_headers(outgoing)
    assert "X-Debug" not in outgoing
    assert outgoing.getall("X-Team") == ["blue"]
    assert outgoing["Accept"] == "*/*"


def test_response_headers_added_and_removed() -> None:
    response = CIMultiDict([("Server", "nginx"), ("Content-Type", "text/html")])
    chain(HEADERS).response_headers(response)
    assert "Server" not in response
    assert response["X-Frame-Options"] == "DENY"
    assert response["Content-Type"] == "text/html"


def test_plain_dicts_are_matched_case_insensitively() -> None:
    outgoing = {"x-debug": "1", "X-TEAM": "forged"}
    chain(HEADERS).upstream_request_headers(outgoing)
    assert outgoing == {"X-Team": "blue"}


def test_no_headers_module_changes_nothing() -> None:
    outgoing = CIMultiDict([("X-Debug", "1")])
    edge = chain({})
    edge.upstream_request_headers(outgoing)
    edge.response_headers(outgoing)
    assert list(outgoing.items()) == [("X-Debug", "1")]


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"request": {"add": {"Bad Name": "x"}}}, 'headers.request.add["Bad Name"]'),
        (
            {"response": {"add": {"X-Ok": "a\r\nSet-Cookie: evil=1"}}},
            'headers.response.add["X-Ok"]',
        ),
        ({"request": {"remove": ["X-Ok", "Host"]}}, "headers.request.remove[1]"),
        # `^…$` with re.match accepted a trailing newline; the name must match whole.
        ({"request": {"add": {"X-Team\n": "blue"}}}, 'headers.request.add["X-Team\n"]'),
        ({"response": {"add": {"Content-Length": "0"}}}, 'headers.response.add["Content-Length"]'),
    ],
)
def test_invalid_header_changes_are_config_errors(raw: dict[str, object], field: str) -> None:
    with pytest.raises(ModuleConfigError) as caught:
        chain({"headers": raw})
    assert caught.value.field == field
    assert "evil" not in str(caught.value)


def test_compression_flag() -> None:
    assert chain({"compression": {}}).compress
    assert not chain({"compression": {"enabled": False}}).compress
    assert not chain({}).compress


JSON_BIG = {"Content-Type": "application/json", "Content-Length": "5000"}


@pytest.mark.parametrize(
    ("accept", "response", "expected"),
    [
        ("gzip, deflate, br", JSON_BIG, True),
        ("br;q=1.0, gzip;q=0.5", JSON_BIG, True),
        ("*", JSON_BIG, True),
        ("gzip;q=0", JSON_BIG, False),
        ("*, gzip;q=0", JSON_BIG, False),
        ("identity", JSON_BIG, False),
        ("", JSON_BIG, False),
        ("gzip", {"Content-Type": "text/html; charset=utf-8"}, True),
        ("gzip", {"Content-Type": "application/vnd.api+json"}, True),
        ("gzip", {"Content-Type": "image/png", "Content-Length": "5000"}, False),
        ("gzip", {"Content-Type": "text/plain", "Content-Length": "100"}, False),
        ("gzip", {**JSON_BIG, "Content-Encoding": "br"}, False),
        ("gzip", {**JSON_BIG, "Cache-Control": "public, no-transform"}, False),
        ("gzip", {"Content-Length": "5000"}, False),
    ],
)
def test_compression_policy(accept: str, response: dict[str, str], expected: bool) -> None:
    request = CIMultiDict({"Accept-Encoding": accept})
    assert should_compress(request, CIMultiDict(response)) is expected
    assert chain({"compression": {}}).should_compress(request, CIMultiDict(response)) is expected
    assert chain({}).should_compress(request, CIMultiDict(response)) is False
