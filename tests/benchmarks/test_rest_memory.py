"""``benchmarks/rest_memory.py``'s in-cluster row: ``interlock run`` as a Pod runs it.

The row is the issue's target only if the controller is really configured by the service
account (``load_incluster_config``), not by a kubeconfig it could still find: the command and
environment are checked from what ``in_a_pod`` builds, and, as root (``unshare --mount``), a
real run must become ready with the service account's token and must not with another.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import rest_memory

CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def _kubeconfig(path: Path) -> Path:
    config = {
        "clusters": [
            {
                "name": "c",
                "cluster": {
                    "server": "https://127.0.0.1:6443",
                    "certificate-authority-data": base64.b64encode(CA).decode(),
                },
            }
        ],
        "users": [{"name": "u", "user": {"token": "the-token"}}],
    }
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_pod_has_the_service_account_and_no_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", "/somewhere/kubeconfig")
    kubeconfig = _kubeconfig(tmp_path / "kubeconfig")
    run = ["python", "-m", "interlock", "run", "--kubeconfig", str(kubeconfig), "--x", "1"]

    command, env = rest_memory.in_a_pod(run, kubeconfig=kubeconfig, workdir=tmp_path, tree=None)

    account = tmp_path / "serviceaccount"
    # As the kubelet writes them: the token without a trailing newline, the CA's PEM.
    assert (account / "token").read_text() == "the-token"
    assert (account / "ca.crt").read_bytes() == CA
    assert command[:3] == ["unshare", "--mount", "--propagation"]
    assert command[-6:] == ["python", "-m", "interlock", "run", "--x", "1"]
    assert "--kubeconfig" not in command
    assert command[command.index(str(account)) + 1] == rest_memory.SERVICE_ACCOUNT
    assert "KUBECONFIG" not in env
    assert not (Path(env["HOME"]) / ".kube").exists()
    assert (env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"]) == ("127.0.0.1", "6443")


@pytest.mark.skipif(not rest_memory.can_run_in_a_pod(), reason="needs root, unshare and mount")
def test_the_in_cluster_controller_uses_the_service_account_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _ready, rss, _cpu = asyncio.run(rest_memory.at_rest(0, flags=[], config="in-cluster"))
    assert rss > 0  # ready, without PyYAML mapped (at_rest raises otherwise)

    built = rest_memory.in_a_pod

    def another_token(
        command: list[str], *, kubeconfig: Path, workdir: Path, tree: str | None
    ) -> tuple[list[str], dict[str, str]]:
        wrapped = built(command, kubeconfig=kubeconfig, workdir=workdir, tree=tree)
        (workdir / "serviceaccount" / "token").write_text("not-the-token")
        return wrapped

    monkeypatch.setattr(rest_memory, "in_a_pod", another_token)
    # No other credentials reach the child: with the token refused it never becomes ready.
    with pytest.raises(RuntimeError, match="exited"):
        asyncio.run(rest_memory.at_rest(0, flags=[], config="in-cluster"))
    assert os.path.exists(rest_memory.SERVICE_ACCOUNT) is False  # nothing outside its namespace
