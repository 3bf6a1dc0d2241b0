"""interlock's own API servers answer only requests whose ``Host`` names them (DNS rebinding).

A page on ``evil.example`` whose name is made to resolve to ``127.0.0.1`` (or a Pod's IP) can
make a browser call the embedded API server, the admin server, the outbound policy API or the
``interlock edge`` admin API — and read the answers as its own. Its requests say ``Host:
evil.example``. Here the real processes run (``interlock run --embedded``, ``interlock edge``)
and each server is asked with such a Host: 421, nothing served, nothing changed. The names
clients really use still work: IP addresses (kubelet probes by Pod IP, a Service's cluster IP),
``localhost``, and the in-cluster Service names given with ``--allowed-host``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from pathlib import Path

import yaml

from tests.kit.cli_process import Running, http_get, interlock_argv, wait_http
from tests.kit.edge_admin import ROUTE, STRIPPED, guard_with_basic_auth

EVIL = "evil.example"
SERVICE = """
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  ports: [{name: http, port: 80}]
"""


async def status_of(
    address: tuple[str, int],
    path: str,
    host: str,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    tls: ssl.SSLContext | None = None,
) -> int:
    """The status line's code of one raw HTTP/1.1 request with exactly this ``Host``."""
    reader, writer = await asyncio.open_connection(
        *address, ssl=tls, server_hostname=address[0] if tls else None
    )
    try:
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        length = f"Content-Length: {len(body)}\r\n" if body else ""
        head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n{extra}{length}\r\n"
        writer.write(head.encode() + body)
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), 30)
        return int(line.split()[1])
    finally:
        writer.close()


def _address(url: str) -> tuple[str, int]:
    host, _, port = url.split("://", 1)[1].rstrip("/").rpartition(":")
    return host.strip("[]"), int(port)


async def test_interlock_run_answers_only_hosts_that_name_its_servers(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "web.yaml").write_text(SERVICE)
    kubeconfig = tmp_path / "kubeconfig"
    argv = interlock_argv(
        "run",
        "--embedded",
        *("--manifests", str(manifests), "--write-kubeconfig", str(kubeconfig)),
        *("--policy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"),
        *("--allowed-host", "interlock-policy.interlock-system.svc"),
        *("--allowed-host", "*.interlock-system.svc.cluster.local"),
    )
    run = Running(argv, log=tmp_path / "run.log")
    try:
        policy = _address(run.wait_for(r"policy API listening on (http://\S+)")[1])
        admin_url = run.wait_for(r"admin listening on (http://\S+)")[1]
        admin = _address(admin_url)
        api = _address(run.wait_for(r"embedded API server at (https://\S+)")[1])
        wait_http(f"{admin_url}/readyz")
        config = yaml.safe_load(kubeconfig.read_text())
        ca = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"])
        tls = ssl.create_default_context(cadata=ca.decode())
        bearer = {"Authorization": f"Bearer {config['users'][0]['user']['token']}"}
        watch = "/v1/outbound/default/web/80?watch=true"
        get = "/v1/outbound/default/web/80"
        probe = "/healthz"

        async def check(
            address: tuple[str, int],
            path: str,
            good: list[str],
            *,
            headers: dict[str, str] | None = None,
            tls: ssl.SSLContext | None = None,
        ) -> None:
            for host in (EVIL, f"{EVIL}:{address[1]}", "127.0.0.1.evil.example", "localhost.evil"):
                status = await status_of(address, path, host, headers=headers, tls=tls)
                assert status == 421, (address, path, host, status)
            for host in good:
                status = await status_of(address, path, host, headers=headers, tls=tls)
                assert status == 200, (address, path, host, status)

        here = [f"127.0.0.1:{policy[1]}", "localhost", "[::1]:8090", "10.42.0.7:8090"]
        in_cluster = [
            "interlock-policy.interlock-system.svc:8090",
            "INTERLOCK-POLICY.interlock-system.svc.cluster.local.",
        ]
        # The policy API: a watch (served by the lean stream front), a GET, the schema.
        await check(policy, watch, here + in_cluster)
        await check(policy, get, here + in_cluster)
        # The admin server: probes by Pod IP (kubelet), metrics, debug from loopback.
        await check(admin, probe, [f"127.0.0.1:{admin[1]}", "10.42.0.7:9090", "localhost:9090"])
        await check(admin, "/metrics", ["10.42.0.7:9090"])
        await check(admin, "/debug/actors", [f"127.0.0.1:{admin[1]}"])
        # The embedded API server, with its token: a rebound page must not read Secrets.
        secrets = "/api/v1/namespaces/default/secrets"
        await check(api, secrets, [f"127.0.0.1:{api[1]}", "localhost"], headers=bearer, tls=tls)
        await check(api, "/healthz", [f"127.0.0.1:{api[1]}"], tls=tls)
    finally:
        run.stop()


async def test_the_edge_admin_api_refuses_a_rebound_host(tmp_path: Path) -> None:
    token = "edge-admin-token-for-rebinding"
    token_file = tmp_path / "token"
    token_file.write_text(token)
    edge = Running(
        interlock_argv(
            "edge",
            *("--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"),
            *("--admin-token-file", str(token_file)),
            *("--allowed-host", "interlock-edge-admin.ingress.svc"),
        ),
        log=tmp_path / "edge.log",
    )
    host = "shop.example"
    try:
        data_plane = edge.wait_for(r"edge listening on (http://\S+)")[1]
        admin_url = edge.wait_for(r"edge admin API on (http://\S+)")[1]
        await guard_with_basic_auth(admin_url, token, host)
        assert http_get(f"{data_plane}/", headers={"Host": host})[0] == 401
        admin = _address(admin_url)
        modules = f"/v1/hosts/{host}/routes/{ROUTE.replace('/', '%2F')}/modules"
        token_header = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        # The attack: the token is not even needed to be refused, but here it is sent.
        for rebound in (EVIL, f"{EVIL}:{admin[1]}"):
            status = await status_of(
                admin, modules, rebound, method="PUT", headers=token_header, body=STRIPPED
            )
            assert status == 421
            assert await status_of(admin, "/v1/snapshot", rebound, headers=token_header) == 421
        assert http_get(f"{data_plane}/", headers={"Host": host})[0] == 401  # still guarded
        for named in (f"127.0.0.1:{admin[1]}", "interlock-edge-admin.ingress.svc:9091"):
            assert await status_of(admin, "/v1/snapshot", named, headers=token_header) == 200
        snapshot = await status_of(admin, "/healthz", EVIL)
        assert snapshot == 421
    finally:
        edge.stop()
    assert json.dumps(edge.lines).find(token) < 0
