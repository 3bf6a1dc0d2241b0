"""A request must not reach a backend past the modules of the route whose path the
backend will act on.

Each attack is first sent straight to the backend, to show that this backend really serves the
protected resource for it; then through the edge, which must refuse it (400) or route it to the
protected route (403) — never answer with the backend's secret.
"""

from __future__ import annotations

import pytest

from tests.kit.raw_http1 import send_raw

from .conftest import SECRET, Edge, FileBackend, NodeBackend, WerkzeugBackend, get_request


async def _assert_refused(edge: Edge, backend: tuple[str, int], target: str) -> None:
    await edge.protect_admin(backend)
    answer = await send_raw(edge.address, get_request(target))
    assert answer.status == 400, (target, answer.status)


async def _assert_guarded(edge: Edge, backend: tuple[str, int], target: str) -> None:
    direct = await send_raw(backend, get_request(target))
    assert SECRET in direct.body, f"the backend does not serve the secret for {target!r}"
    await edge.protect_admin(backend)
    answer = await send_raw(edge.address, get_request(target))
    assert SECRET not in answer.body, f"{target!r} reached the backend past /admin's modules"
    assert answer.status in (400, 403), (target, answer.status)


async def _assert_safe(edge: Edge, backend: tuple[str, int], target: str, *, refused: bool) -> None:
    """``target`` is refused by the edge when ``refused``, else guarded as any other path."""
    if refused:
        await _assert_refused(edge, backend, target)
    else:
        await _assert_guarded(edge, backend, target)


@pytest.mark.parametrize(
    "target",
    [
        "/%2fadmin/secret.txt",
        "/%2Fadmin/secret.txt",
        "/%2Fadmin%2Fsecret.txt",
        "/public.txt/..%2F..%2Fadmin/secret.txt",
        "/x/%2e%2e/admin/secret.txt",
        "//admin/secret.txt",
        "/%61dmin/secret.txt",
    ],
)
async def test_encoded_slashes_and_dots_against_http_server(
    edge: Edge, file_backend: FileBackend, target: str
) -> None:
    await _assert_guarded(edge, file_backend.address, target)


@pytest.mark.parametrize(
    "target", ["/admin#x", "/admin#/../public", "/admin/#", "/admin%23x/../secret"]
)
async def test_fragments_against_werkzeug(
    edge: Edge, werkzeug_backend: WerkzeugBackend, target: str
) -> None:
    # werkzeug decodes %23 to a literal '#' in PATH_INFO: no bypass there, but the edge
    # refuses it all the same (a backend decoding it before splitting would see a fragment).
    await _assert_safe(edge, werkzeug_backend.address, target, refused="%23" in target)


@pytest.mark.parametrize(
    "target",
    [
        "/x\\..\\admin",
        "/public\\..\\admin",
        "/x/..\\admin",
        "/x%5C..%5Cadmin",
        "/x/%2e%2e/admin",
        "/x/%2E./admin",
    ],
)
async def test_backslashes_against_whatwg_url(
    edge: Edge, node_backend: NodeBackend, target: str
) -> None:
    # WHATWG keeps %5C encoded (no bypass in Node); refused anyway, as nginx-on-Windows and
    # IIS decode it to a separator.
    await _assert_safe(edge, node_backend.address, target, refused="%5C" in target)


@pytest.mark.parametrize("target", ["/public/..;/admin/secret.txt", "/x/.;a/..;b/admin"])
async def test_dot_segments_with_parameters_are_refused(
    edge: Edge, file_backend: FileBackend, target: str
) -> None:
    # Tomcat and Spring strip ";params" from each segment before resolving dots: "..;" is "..".
    await _assert_refused(edge, file_backend.address, target)


async def test_ordinary_paths_still_reach_the_backend(
    edge: Edge, file_backend: FileBackend
) -> None:
    await edge.protect_admin(file_backend.address)
    answer = await send_raw(edge.address, get_request("/public.txt?q=%2F#"))
    assert answer.status == 400  # a fragment in the request-target is never valid HTTP
    answer = await send_raw(edge.address, get_request("/public.txt?next=%2Fadmin%23x"))
    assert (answer.status, answer.body) == (200, b"public")
    answer = await send_raw(edge.address, get_request("/%70ublic.txt"))
    assert (answer.status, answer.body) == (200, b"public")
