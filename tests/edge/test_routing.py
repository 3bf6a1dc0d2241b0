"""Host and path matching rules, as pure functions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from interlock.dataplane import request_target
from interlock.dataplane.request_target import clean_path, normalize_host, split_target
from interlock.edge.provider import PathType
from interlock.edge.routing import ServedRoute, path_matches, select_route


def R(route_id: str, path: str, path_type: PathType) -> ServedRoute:
    """A route with only what choosing it reads (no modules, no backend)."""
    return ServedRoute(route_id, path, path_type, None, None, None, {})


def table(routes: list[ServedRoute]) -> dict[str, ServedRoute]:
    """A host's table of ``routes``, as the edge keeps it (keyed by position here: the
    strategies below may give two routes one id)."""
    return {str(index): route for index, route in enumerate(routes)}


@pytest.mark.parametrize(
    ("header", "host"),
    [
        ("Example.COM", "example.com"),
        ("example.com:8080", "example.com"),
        ("example.com.", "example.com"),
        ("[::1]:8443", "[::1]"),
        ("", ""),
    ],
)
def test_normalize_host(header: str, host: str) -> None:
    assert normalize_host(header) == host


@pytest.mark.parametrize(
    ("route_path", "request_path", "matches"),
    [
        ("/foo", "/foo", True),
        ("/foo", "/foo/", True),
        ("/foo", "/foo/bar", True),
        ("/foo", "/foobar", False),
        ("/foo/", "/foo", True),
        ("/foo/", "/foobar", False),
        ("/", "/anything/at/all", True),
    ],
)
def test_prefix_matches_whole_segments(route_path: str, request_path: str, matches: bool) -> None:
    assert (
        path_matches(path_type="Prefix", route_path=route_path, request_path=request_path)
        is matches
    )


def test_exact_matches_only_the_same_path() -> None:
    assert path_matches(path_type="Exact", route_path="/foo", request_path="/foo")
    assert not path_matches(path_type="Exact", route_path="/foo", request_path="/foo/")


def test_exact_first_then_longest_prefix() -> None:
    routes = [
        R("root", "/", "Prefix"),
        R("api", "/api", "Prefix"),
        R("v1", "/api/v1", "Prefix"),
        R("v1-exact", "/api/v1", "Exact"),
    ]
    assert select_route(table(routes), "/api/v1") == routes[3]
    assert select_route(table(routes), "/api/v1/x") == routes[2]
    assert select_route(table(routes), "/api/v2") == routes[1]
    assert select_route(table(routes), "/other") == routes[0]
    assert select_route(table(routes[1:]), "/other") is None


@given(st.permutations(["b", "a", "c"]))
def test_same_path_winner_does_not_depend_on_order(order: list[str]) -> None:
    routes = [R(route_id, "/same", "Prefix") for route_id in order]
    chosen = select_route(table(routes), "/same/x")
    assert chosen is not None
    assert chosen.route_id == "a"


PATHS = st.sampled_from(["/", "/a", "/a/", "/a/b", "/ab", "/a//", "/b", ""])
ROUTES = st.lists(
    st.builds(R, st.sampled_from(["r1", "r2", "r3"]), PATHS, st.sampled_from(["Exact", "Prefix"])),
    max_size=5,
)


@given(ROUTES, PATHS)
def test_select_route_picks_by_path_matches(routes: list[ServedRoute], request_path: str) -> None:
    """The route chosen is the best, by (Exact first, longest prefix, smallest id), of those
    :func:`path_matches` matches (select_route inlines it)."""
    matching = [
        r
        for r in routes
        if path_matches(path_type=r.path_type, route_path=r.path, request_path=request_path)
    ]
    chosen = select_route(table(routes), request_path)
    if not matching:
        assert chosen is None
        return
    assert chosen is not None
    best = max(
        (r.path_type == "Exact", len(r.path.rstrip("/")), [-ord(c) for c in r.route_id])
        for r in matching
    )
    assert (
        chosen.path_type == "Exact",
        len(chosen.path.rstrip("/")),
        [-ord(c) for c in chosen.route_id],
    ) == best


@pytest.mark.parametrize(
    ("raw", "routed", "forwarded"),
    [
        ("/public/../admin", "/admin", "/admin"),
        ("/public/%2e%2E/admin", "/admin", "/admin"),
        ("/a/./b/.", "/a/b/", "/a/b/"),
        ("/..", "/", "/"),
        ("//evil.example/x", "/evil.example/x", "/evil.example/x"),
        ("/%61dmin/x", "/admin/x", "/%61dmin/x"),
        ("/a;v=1/b", "/a;v=1/b", "/a;v=1/b"),
        ("/a/", "/a/", "/a/"),
    ],
)
def test_clean_path(raw: str, routed: str, forwarded: str) -> None:
    assert clean_path(raw) == (routed, forwarded)


def test_clean_path_refuses_relative_paths() -> None:
    with pytest.raises(ValueError, match="must start with"):
        clean_path("*")


@pytest.mark.parametrize(
    "raw",
    [
        "/public/%2e%2e%2Fadmin",
        "/%2fadmin",
        "/a%5Cb",
        "/a%00",
        "/a%23b",
        "/a%3Fb",
        "/a%252Fb",
        "/a%3Bb",
        "/a\\b",
        "/admin#x",
        "/a b",
        "/a\tb",
    ],
)
def test_clean_path_refuses_what_backends_read_differently(raw: str) -> None:
    with pytest.raises(ValueError, match="ambiguous"):
        clean_path(raw)


@pytest.mark.parametrize("raw", ["/public/..;/admin", "/a/.;x/b", "/a/%2e%2e;/b"])
def test_clean_path_refuses_dot_segments_with_parameters(raw: str) -> None:
    with pytest.raises(ValueError, match="hides a dot segment"):
        clean_path(raw)


@given(
    st.lists(
        st.sampled_from(
            [
                "a",
                "b",
                ".",
                "..",
                "%2e",
                "%2E%2e",
                "",
                "c%2Fd",
                ".well-known",
                "x%20y",
                "%2e%2e%2Fz",
            ]
        ),
        max_size=8,
    )
)
def test_clean_path_leaves_no_dot_segments(segments: list[str]) -> None:
    try:
        routed, forwarded = clean_path("/" + "/".join(segments))
    except ValueError:
        assert any("%2F" in s for s in segments)  # refused only for an encoded slash
        return
    assert not {".", ".."} & set(routed.split("/"))
    assert "" not in forwarded.split("/")[1:-1]
    assert clean_path(forwarded)[1] == forwarded  # already clean: unchanged


REFUSED_OR_CLEANED = [
    "/public/../admin",
    "/a/./b/.",
    "//evil.example/x",
    "/%61dmin/x",
    "/a%5Cb",
    "/a\\b",
    "/a b",
    "/a\tb",
    "/a\x00b",
    "/a\x7fb",
    "/admin#x",
    "*",
    "",
    "a/b",
    "/public/..;/admin",
    "/.well-known/x",
    "/plain/path",
    "/",
]


def _split_by_clean_path(target: str) -> tuple[str, str, str] | None:
    raw_path, _, query = target.partition("?")
    if "#" in query:
        return None
    try:
        return (*clean_path(raw_path), query)
    except ValueError:
        return None


def _split(target: str) -> tuple[str, str, str] | None:
    try:
        return split_target(target)
    except ValueError:
        return None


@pytest.mark.parametrize("raw", REFUSED_OR_CLEANED)
@pytest.mark.parametrize("query", ["", "?a=b", "?", "?x#y"])
def test_split_target_reads_the_path_as_clean_path_does(raw: str, query: str) -> None:
    """split_target answers a path with nothing to clean without calling clean_path: the same
    answer, and the same refusals (a space, a backslash, a control, a relative path)."""
    assert _split(raw + query) == _split_by_clean_path(raw + query)


@given(st.text(alphabet="/.%2fFeE5c\\#?; \t\x00a\x7f\x85\xa0\xad\xe9", max_size=16))
def test_split_target_agrees_with_clean_path(target: str) -> None:
    """Printable or not (split_target's isprintable() check: DEL, a C1 control, a no-break
    space, a soft hyphen, a letter beyond ASCII), the same answer as clean_path's."""
    assert _split(target) == _split_by_clean_path(target)


KEPT_OR_NOT = ["/", "/a/../b", "/a/./b/", "//x", "/%61dmin", "/a?b=c", "/a?", "/x?y#z", "a/b"]


def test_split_target_answers_a_target_again_as_it_read_it() -> None:
    """A target read before is answered as it was read (each its own answer), and one refused
    is refused every time."""
    for _ in range(3):
        for target in KEPT_OR_NOT:
            assert _split(target) == _split_by_clean_path(target), target


def test_split_target_keeps_no_query_and_a_bounded_count() -> None:
    split_target("/kept?token=s3cret")
    assert not [target for target in request_target._split if "s3cret" in target]
    for number in range(request_target._SPLIT_MOST + 10):
        assert split_target(f"/p{number}") == (f"/p{number}",) * 2 + ("",)
    assert 0 < len(request_target._split) <= request_target._SPLIT_MOST
    long = "/" + "x" * request_target._SPLIT_LENGTH
    assert split_target(long) == (long, long, "")
    assert long not in request_target._split


@given(ROUTES, PATHS)
def test_select_route_chooses_whatever_the_table_order(
    routes: list[ServedRoute], request_path: str
) -> None:
    """The choice over a host's table does not depend on its order (the same route, or one
    just like it)."""
    routes_table = table(routes)
    chosen = select_route(routes_table, request_path)
    backwards = select_route(dict(reversed(routes_table.items())), request_path)
    assert _named(chosen) == _named(backwards)


def _named(route: ServedRoute | None) -> tuple[str, str, str] | None:
    """What tells two routes apart for choosing (ServedRoute compares by identity): its id,
    its type, its path without trailing slashes."""
    return None if route is None else (route.route_id, route.path_type, route.path.rstrip("/"))
