"""Filters on one request: the Gateway API's prefix, redirect and header semantics, as tables."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from multidict import CIMultiDict

from interlock.dataplane.filters import (
    HeaderEdits,
    redirect_location,
    replace_prefix,
    split_host,
)
from interlock.model.gateway import HTTPHeaderFilter, HTTPRequestRedirectFilter, HTTPRouteMatch


@pytest.mark.parametrize(
    ("path", "prefix", "replacement", "expected"),
    [
        ("/foo/bar", "/foo", "/xyz", "/xyz/bar"),
        ("/foo/bar", "/foo/", "/xyz", "/xyz/bar"),
        ("/foo/bar", "/foo", "/xyz/", "/xyz/bar"),
        ("/foo/bar", "/foo", "/", "/bar"),
        ("/foo", "/foo", "/xyz", "/xyz"),
        ("/foo", "/foo", "/", "/"),
        ("/foo/", "/foo", "/xyz", "/xyz/"),
        ("/prefix/one/two", "/prefix/one", "/one", "/one/two"),
        ("/strip-prefix/three", "/strip-prefix", "/", "/three"),
        ("/a/b/c", "/", "/x", "/x/a/b/c"),
        ("/", "/", "/x", "/x"),
        ("/caf%C3%A9/x", "/café", "/y", "/y/x"),  # segments count on the encoded path
    ],
)
def test_replace_prefix_match(path: str, prefix: str, replacement: str, expected: str) -> None:
    assert replace_prefix(path, prefix=prefix, replacement=replacement) == expected


PREFIX = HTTPRouteMatch.model_validate({"path": {"type": "PathPrefix", "value": "/old"}})


@pytest.mark.parametrize(
    ("config", "scheme", "host", "path", "query", "expected"),
    [
        ({}, "http", "a.test", "/old/x", "", "http://a.test/old/x"),
        ({"hostname": "b.test"}, "http", "a.test:8080", "/x", "", "http://b.test:8080/x"),
        ({"scheme": "https"}, "http", "a.test:8080", "/x", "q=1", "https://a.test/x?q=1"),
        ({"scheme": "https", "port": 8443}, "http", "a.test", "/x", "", "https://a.test:8443/x"),
        ({"port": 80}, "http", "a.test:8080", "/x", "", "http://a.test/x"),
        ({"port": 443, "scheme": "https"}, "http", "a.test", "/x", "", "https://a.test/x"),
        ({"scheme": "http"}, "https", "a.test", "/x", "", "http://a.test/x"),
        ({}, "https", "a.test:443", "/x", "", "https://a.test/x"),
        ({"hostname": "b.test"}, "http", "[::1]:9000", "/x", "", "http://b.test:9000/x"),
        (
            {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"}},
            "http",
            "a.test",
            "/old/x",
            "",
            "http://a.test/new/x",
        ),
        (
            {"path": {"type": "ReplaceFullPath", "replaceFullPath": "/full"}},
            "http",
            "a.test",
            "/old/x",
            "a=b",
            "http://a.test/full?a=b",
        ),
    ],
)
def test_redirect_location(
    config: dict[str, object], scheme: str, host: str, path: str, query: str, expected: str
) -> None:
    redirect = HTTPRequestRedirectFilter.model_validate(config)
    assert (
        redirect_location(redirect, scheme=scheme, host=host, path=path, query=query, match=PREFIX)
        == expected
    )


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("a.test", ("a.test", None)),
        ("a.test:8080", ("a.test", 8080)),
        ("[::1]", ("[::1]", None)),
        ("[::1]:80", ("[::1]", 80)),
    ],
)
def test_split_host(host: str, expected: tuple[str, int | None]) -> None:
    assert split_host(host) == expected


def test_header_modifier_sets_adds_and_removes() -> None:
    edits = HeaderEdits.of(
        HTTPHeaderFilter.model_validate(
            {
                "set": [{"name": "X-Set", "value": "new"}],
                "add": [{"name": "X-Add", "value": "more"}],
                "remove": ["X-Gone"],
            }
        )
    )
    headers = CIMultiDict(
        [("x-set", "old"), ("x-set", "older"), ("X-Add", "first"), ("x-gone", "1"), ("Keep", "k")]
    )
    edits.apply(headers)
    assert headers.getall("X-Set") == ["new"]
    assert headers.getall("X-Add") == ["first", "more"]
    assert "X-Gone" not in headers
    assert headers["Keep"] == "k"


_SEGMENT = st.text(alphabet="abcxyz019-_.~%", min_size=1, max_size=6).filter(
    lambda s: s not in (".", "..")
)
_PATH = st.lists(_SEGMENT, min_size=0, max_size=5).map(lambda parts: "/" + "/".join(parts))


@given(prefix=_PATH, rest=st.lists(_SEGMENT, max_size=4), replacement=_PATH)
def test_replace_prefix_keeps_what_follows_the_prefix(
    prefix: str, rest: list[str], replacement: str
) -> None:
    path = prefix.rstrip("/") + "".join("/" + s for s in rest) or "/"
    replaced = replace_prefix(path, prefix=prefix, replacement=replacement)
    assert replaced.startswith("/") and "//" not in replaced
    if rest:
        assert replaced.endswith("/" + "/".join(rest))
        assert replaced == replacement.rstrip("/") + "/" + "/".join(rest)
    else:
        assert replaced == replacement
    # Replacing a prefix by itself changes nothing.
    assert replace_prefix(path, prefix=prefix, replacement=prefix) in (path, path + "/")
