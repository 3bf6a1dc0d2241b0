"""The embedded API server answers only clients holding its kubeconfig's credentials.

It holds Secrets; anonymous clients used to read them. Now, as a real kube-apiserver whose
anonymous access is limited to the health and version probes: every other request without the
kubeconfig's bearer token, or with another one, gets 401 and kube-apiserver's ``Unauthorized``
Status, and the token only travels over TLS (kubectl sends a kubeconfig's credentials to
``https://`` servers only).
"""

from __future__ import annotations

import asyncio
import base64
import shutil
import stat
from pathlib import Path

import aiohttp
import pytest
import yaml

from interlock.embedded import EmbeddedApiServer

UNAUTHORIZED = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "Unauthorized",
    "reason": "Unauthorized",
    "code": 401,
}
SECRET_VALUE = "pl4nted-secret-value"


def _plant_secret(server: EmbeddedApiServer) -> None:
    server.store.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "db", "namespace": "default"},
            "data": {"password": base64.b64encode(SECRET_VALUE.encode()).decode()},
        }
    )


async def _get(
    server: EmbeddedApiServer, path: str, headers: dict[str, str]
) -> tuple[int, str, str]:
    connector = aiohttp.TCPConnector(ssl=server.client_ssl())
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.get(server.url + path, headers=headers) as response,
    ):
        return response.status, response.headers.get("Content-Type", ""), await response.text()


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer not-the-token"},
        {"Authorization": "Basic YWRtaW46YWRtaW4="},
        {"Authorization": "Bearer"},
    ],
    ids=["anonymous", "another token", "basic", "empty bearer"],
)
@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/secrets",
        "/api/v1/namespaces/default/secrets/db",
        "/api/v1/secrets?watch=true",
        "/api",
        "/apis",
        "/openapi/v3",
        "/no/such/path",
    ],
)
async def test_requests_without_the_token_are_refused_401(
    api_server: EmbeddedApiServer, path: str, headers: dict[str, str]
) -> None:
    _plant_secret(api_server)
    status, content_type, body = await _get(api_server, path, headers)
    assert (status, content_type) == (401, "application/json")
    assert yaml.safe_load(body) == UNAUTHORIZED
    assert base64.b64encode(SECRET_VALUE.encode()).decode() not in body


async def test_the_kubeconfig_token_reads_and_probes_need_none(
    api_server: EmbeddedApiServer, tmp_path: Path
) -> None:
    _plant_secret(api_server)
    path = api_server.write_kubeconfig(tmp_path / "kubeconfig")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    (user,) = yaml.safe_load(path.read_text())["users"]
    token = user["user"]["token"]
    # The scheme in any case, as kube-apiserver reads it.
    for scheme in ("Bearer", "bearer"):
        status, _, body = await _get(
            api_server,
            "/api/v1/namespaces/default/secrets/db",
            {"Authorization": f"{scheme} {token}"},
        )
        assert status == 200 and "password" in body
    for probe in ("/healthz", "/livez", "/readyz", "/version"):
        status, _, _ = await _get(api_server, probe, {})
        assert status == 200, probe


async def test_plain_http_is_not_served(api_server: EmbeddedApiServer) -> None:
    # The token must never travel in clear text: the server speaks TLS only.
    plain = api_server.url.replace("https://", "http://")

    async def plain_get() -> int:
        async with (
            aiohttp.ClientSession() as session,
            session.get(plain + "/api/v1/secrets", headers=api_server.auth_headers()) as answer,
        ):
            return answer.status

    with pytest.raises(aiohttp.ClientError):
        await plain_get()


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
async def test_kubectl_reads_with_the_kubeconfigs_token_only(
    api_server: EmbeddedApiServer, tmp_path: Path
) -> None:
    _plant_secret(api_server)
    good = api_server.write_kubeconfig(tmp_path / "kubeconfig")
    config = yaml.safe_load(good.read_text())
    config["users"][0]["user"] = {"token": "not-the-token"}
    another = tmp_path / "another.kubeconfig"
    another.write_text(yaml.safe_dump(config))

    async def kubectl(kubeconfig: Path) -> tuple[int, str, str]:
        process = await asyncio.create_subprocess_exec(
            "kubectl",
            "--kubeconfig",
            str(kubeconfig),
            "get",
            "secret",
            "db",
            "-o",
            "jsonpath={.data.password}",
            env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
        return process.returncode or 0, out.decode(), err.decode()

    code, out, err = await kubectl(good)
    assert code == 0, err
    assert base64.b64decode(out).decode() == SECRET_VALUE
    code, out, err = await kubectl(another)
    assert code != 0 and "You must be logged in to the server (Unauthorized)" in err, err
    assert out == ""
