"""`interlock edge`: the data plane alone, as a Deployment would run it."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from tests.kit.cli_process import Running, http_get, interlock_argv


def test_edge_prints_its_addresses_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("edge-admin-token\n")
    edge = Running(
        interlock_argv(
            "edge",
            *("--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"),
            *("--admin-token-file", str(token)),
        ),
        log=tmp_path / "edge.log",
    )
    try:
        data_plane = edge.wait_for(r"edge listening on (http://\S+)")[1]
        admin = edge.wait_for(r"edge admin API on (http://\S+)")[1]
        status, _, body = http_get(
            f"{admin}/v1/snapshot", headers={"Authorization": "Bearer edge-admin-token"}
        )
        assert status == 200
        assert json.loads(body) == {"hosts": []}
        assert http_get(f"{data_plane}/", headers={"Host": "unknown.test"})[0] == 404
        edge.signal(signal.SIGTERM)
        assert edge.wait(within=60.0) == 0
    finally:
        edge.stop()
