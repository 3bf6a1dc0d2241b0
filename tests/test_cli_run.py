"""`interlock run` flags and environment variables, and `interlock policy` targets."""

from __future__ import annotations

import asyncio
import json
import signal
import sys

import aiohttp
import pytest

from interlock.cli import build_parser
from interlock.cli.policy import policy_url
from interlock.cli.run import config_from_args
from interlock.config import Address

# A fresh `python -m interlock` imports everything before it prints a line: about two seconds on
# a quiet machine, over thirty at load average 20 (the stress test saw a 30 s bound expire). The
# bound only ends a hung process; it costs nothing when the process answers.
STARTS_WITHIN = 180.0


def parse(argv: list[str]):
    return config_from_args(build_parser().parse_args(argv))


def test_run_flags_build_the_config():
    config = parse(
        [
            "run",
            "--embedded",
            "--manifests",
            "a.yaml",
            "--manifests",
            "dir",
            "--write-kubeconfig",
            "kc",
            "--policy-addr",
            "127.0.0.1:0",
            "--admin-addr",
            "[::1]:9000",
            "--namespace",
            "shop",
            "--namespace",
            "pay",
            "--lease-duration",
            "1.5",
            "--lease-renew-deadline",
            "1",
            "--lease-retry-period",
            "0.5",
            "--lease-identity",
            "me",
            "--log-level",
            "debug",
        ]
    )
    assert config.cluster.embedded
    assert config.cluster.manifests == ("a.yaml", "dir")
    assert config.cluster.write_kubeconfig == "kc"
    assert config.policy.addr == Address("127.0.0.1", 0)
    assert config.admin.addr == Address("::1", 9000)
    assert str(config.admin.addr) == "[::1]:9000"
    assert config.cluster.namespaces == ("shop", "pay")
    assert config.leadership.duration == 1.5
    assert config.leadership.identity == "me"
    assert config.observability.log_level == "DEBUG"
    # `interlock run` is the whole process: its GC is tuned for a long-lived controller.
    assert config.tune_gc


def test_edge_flags_build_the_config(monkeypatch):
    config = parse(
        [
            "run",
            "--edge-addr",
            "127.0.0.1:0",
            "--edge-tls-addr",
            "127.0.0.1:8443",
            "--trusted-proxy",
            "10.0.0.0/8",
            "--trusted-proxy",
            "fd00::/8",
        ]
    )
    assert config.edge.addr == Address("127.0.0.1", 0)
    assert config.edge.tls_addr == Address("127.0.0.1", 8443)
    assert config.edge.trusted_proxies == ("10.0.0.0/8", "fd00::/8")
    monkeypatch.setenv("INTERLOCK_TRUSTED_PROXY", "192.168.0.0/16, 172.16.0.1")
    assert parse(["run"]).edge.trusted_proxies == ("192.168.0.0/16", "172.16.0.1")


def test_every_flag_can_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("INTERLOCK_EMBEDDED", "true")
    monkeypatch.setenv("INTERLOCK_POLICY_ADDR", "127.0.0.1:1234")
    monkeypatch.setenv("INTERLOCK_NAMESPACE", "a, b")
    monkeypatch.setenv("INTERLOCK_WATCH_GRACE", "0.25")
    config = parse(["run"])
    assert config.cluster.embedded
    assert config.policy.addr == Address("127.0.0.1", 1234)
    assert config.cluster.namespaces == ("a", "b")
    assert config.policy.watch_grace == 0.25
    # A flag on the command line wins over the environment.
    assert parse(["run", "--namespace", "c"]).cluster.namespaces == ("c",)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--policy-addr", "nope"], "--policy-addr: 'nope' is not HOST:PORT"),
        (["run", "--admin-addr", "h:99999"], "--admin-addr: port 99999 is out of range"),
        (["run", "--embedded", "--kubeconfig", "x"], "--embedded cannot be combined"),
        (["run", "--manifests", "x"], "--manifests and --write-kubeconfig need --embedded"),
        (["run", "--trusted-proxy", "10.0.0.0/33"], "--trusted-proxy: '10.0.0.0/33' is not a CIDR"),
        (["run", "--edge-tls-addr", "tls"], "--edge-tls-addr: 'tls' is not HOST:PORT"),
        (
            ["run", "--lease-duration", "5s", "--lease-renew-deadline", "10s"],
            "--lease-duration (5s) must be longer than --lease-renew-deadline (10s)",
        ),
    ],
)
def test_bad_flags_are_reported_by_name(argv, message):
    with pytest.raises(SystemExit) as exit_:
        parse(argv)
    assert message in str(exit_.value)


def test_policy_targets_become_api_urls():
    assert (
        policy_url(server="http://h:1/", target="shop/web:80", client_namespace=None, watch=False)
        == "http://h:1/v1/outbound/shop/web/80"
    )
    assert policy_url(
        server="http://h:1", target="shop/web:80", client_namespace="pay", watch=True
    ).endswith("/v1/outbound/shop/web/80?clientNamespace=pay&watch=true")
    with pytest.raises(ValueError, match="'web:80' is not NS/SVC:PORT"):
        policy_url(server="http://h", target="web:80", client_namespace=None, watch=False)


async def test_run_embedded_prints_addresses_serves_and_exits_0_on_sigterm(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "interlock",
        "run",
        "--embedded",
        "--write-kubeconfig",
        str(kubeconfig),
        "--policy-addr",
        "127.0.0.1:0",
        "--admin-addr",
        "127.0.0.1:0",
        "--trace-file",
        str(tmp_path / "trace.jsonl"),
        "--log-level",
        "WARNING",
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    urls: dict[str, str] = {}
    try:
        while "admin" not in urls:
            line = (await asyncio.wait_for(process.stdout.readline(), STARTS_WITHIN)).decode()
            assert line, "interlock run exited early"
            if line.startswith("policy API listening on "):
                urls["policy"] = line.split()[-1]
            if line.startswith("admin listening on "):
                urls["admin"] = line.split()[-1]
        assert kubeconfig.exists()
        assert not urls["policy"].endswith(":0")
        async with aiohttp.ClientSession() as http:
            deadline = asyncio.get_running_loop().time() + STARTS_WITHIN
            while True:
                async with http.get(urls["admin"] + "/readyz") as response:
                    if response.status == 200:
                        break
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.05)
        # The policy subcommand, as a user would run it.
        client = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "interlock",
            "policy",
            "get",
            "default/web:80",
            "--server",
            urls["policy"],
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await asyncio.wait_for(client.communicate(), STARTS_WITHIN)
        assert client.returncode == 0
        policy = json.loads(out)
        assert policy["service"] == "web"
        assert policy["routes"][0]["kind"] == "Default"
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(process.wait(), STARTS_WITHIN) == 0
    assert (tmp_path / "trace.jsonl").stat().st_size > 0


async def test_run_reports_what_to_fix_when_it_cannot_start(tmp_path):
    busy = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = busy.sockets[0].getsockname()[1]
    cases = [
        (
            ["--kubeconfig", str(tmp_path / "missing")],
            f"--kubeconfig {tmp_path / 'missing'}: no such file",
        ),
        (
            ["--embedded", "--policy-addr", f"127.0.0.1:{port}"],
            f"--policy-addr 127.0.0.1:{port}: cannot listen",
        ),
    ]
    try:
        for flags, message in cases:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "interlock",
                "run",
                "--admin-addr",
                "127.0.0.1:0",
                "--log-level",
                "ERROR",
                *flags,
                stderr=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.DEVNULL,
            )
            _, err = await asyncio.wait_for(process.communicate(), 60)
            assert process.returncode == 1
            assert message in err.decode()
            assert "Traceback" not in err.decode()
    finally:
        busy.close()
        await busy.wait_closed()


def test_linkerd_flags_build_the_config():
    config = parse(
        [
            "run",
            "--grpc-addr",
            "0.0.0.0:8091",
            "--lax-reference-grants",
            "--cluster-network",
            "10.96.0.0/12",
            "--cluster-network",
            "fd00::/8",
        ]
    )
    assert config.linkerd.grpc_addr == Address("0.0.0.0", 8091)
    assert config.linkerd.cluster_networks == ("10.96.0.0/12", "fd00::/8")
    assert config.policy.lax_reference_grants
    plain = parse(["run"])
    assert plain.linkerd.grpc_addr is None
    assert not plain.policy.lax_reference_grants
    assert plain.linkerd.cluster_networks == ()
