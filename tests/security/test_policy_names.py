"""The policy API refuses names with a trailing newline (``$`` matched before a
final newline; the pattern now has to match the whole name)."""

from __future__ import annotations

from typing import Any

import pytest

from interlock.api.policy import build_policy_app
from interlock.api.serving import serve
from interlock.config import Address
from interlock.model.policy_watch import WatchTarget
from tests.kit.raw_http1 import send_raw


class _NoPolicies:
    def open_watch(self, target: WatchTarget) -> Any:
        raise AssertionError(f"a watch was opened for {target}")

    def close_watch(self, target: WatchTarget, slot: Any) -> None:
        raise AssertionError("unreachable")


@pytest.mark.parametrize(
    "path",
    [
        "/v1/outbound/default%0A/web/80",
        "/v1/outbound/default/web%0A/80",
        "/v1/outbound/default/web/80?clientNamespace=shop%0A",
    ],
)
async def test_policy_api_names_with_a_final_newline_are_refused(path: str) -> None:
    site = await serve(
        build_policy_app(source=_NoPolicies(), first_policy_timeout=0.5),  # type: ignore[arg-type]
        Address(host="127.0.0.1", port=0),
    )
    try:
        host, _, port = site.url.removeprefix("http://").rpartition(":")
        answer = await send_raw(
            (host, int(port)),
            f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode(),
        )
    finally:
        await site.stop()
    assert answer.status == 400
    assert b"not a valid Kubernetes name" in answer.body
