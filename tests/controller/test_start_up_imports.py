"""What a starting controller imports: only what its configuration uses (issue 15, memory at rest).

The edge's data plane (HTTP/1 and HTTP/2 servers) and the mesh listener are imported only when
the controller is configured with them, and the edge modules that need ``cryptography`` or PyJWT
(mutualTLS, jwt, oauth, oidc) only when a ModuleSet configures one: together ~14 MiB of RSS that
a controller without them would carry for nothing. PyYAML and kubernetes-asyncio's kubeconfig
loader are imported only when a kubeconfig file is read (not in a pod: issue 29, item 5).

Each check runs in a fresh interpreter: what a module imports depends on what was imported
before, and this test process has imported the edge modules already. Each also checks that the
deferred code does load when it is used, so that a wrong module name cannot make it pass.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

LOADED = """
import sys
CRYPTOGRAPHY = ("cryptography", "jwt", "interlock.edge.modules.identity")
def loaded(*names):
    return sorted(n for n in names if n in sys.modules)
"""
"""Prepended to each check: ``loaded(*names)`` lists those the interpreter has imported;
``CRYPTOGRAPHY`` is what only mutualTLS, jwt, oauth and oidc need."""


def _run(code: str) -> dict[str, list[str]]:
    out = subprocess.run(
        [sys.executable, "-c", LOADED + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, list[str]] = json.loads(out.stdout)
    return result


def test_a_controller_without_edge_or_mesh_imports_neither() -> None:
    result = _run(
        """
        import json
        from interlock.config import Address, ControllerConfig, EdgeConfig, MeshConfig
        from interlock.controller.app import Controller

        deferred = (
            "interlock.controller.edge_half", "interlock.edge.server", "interlock.edge.modules",
            "interlock.controller.mesh_half", "interlock.mesh.server", "h2", "httptools",
            "cryptography", "jwt", "bcrypt",
        )
        Controller(ControllerConfig())
        plain = loaded(*deferred)
        local = Address("127.0.0.1", 0)
        Controller(ControllerConfig(edge=EdgeConfig(addr=local),
                                    mesh=MeshConfig(addr=local)))
        print(json.dumps({"plain": plain, "edge and mesh": loaded(*deferred)}))
        """
    )
    assert result == {
        "plain": [],
        # The edge and the mesh listener load when configured; the edge modules that need
        # cryptography or PyJWT still do not (no ModuleSet configures one).
        "edge and mesh": [
            "bcrypt",
            "h2",
            "httptools",
            "interlock.controller.edge_half",
            "interlock.controller.mesh_half",
            "interlock.edge.modules",
            "interlock.edge.server",
            "interlock.mesh.server",
        ],
    }


EDGE_AND_GATEWAY_MODELS = tuple(
    f"interlock.{name}"
    for name in (
        "actors.ca_bundles",
        "actors.upstream_cache",
        "controller.upstreams",
        "dataplane.filters",
        "dataplane.matching",
        "dataplane.plan",
        "dataplane.upstreams",
        "edge",
        "model.backend_tls",
        "model.edge",
        "model.edge_plan",
        "model.gateway_class",
        "model.gateway_frontend",
        "model.gateway_listeners",
        "model.gateway_mirrors",
        "model.gateway_modules",
        "model.gateway_route_input",
        "model.gateway_routes",
        "model.ingress",
        "model.ingress_nginx",
        "model.listener_sets",
        "model.module_settings",
        "model.moduleset",
    )
)
"""The edge's, the Gateway half's and the data plane's models and plans, and the endpoint cache
the edge and the mesh listener share: an outbound-only controller (``interlock run`` without
``--edge-addr``) never uses them (issue 29 item 5)."""


def test_an_outbound_only_controller_imports_no_edge_gateway_or_ingress_model() -> None:
    result = _run(
        f"""
        import json
        import interlock.cli
        from interlock.config import Address, ControllerConfig, EdgeConfig
        from interlock.controller.app import Controller
        from interlock.controller.kinds import KINDS

        models = {EDGE_AND_GATEWAY_MODELS!r}
        Controller(ControllerConfig())
        found = {{"outbound only": loaded(*models)}}
        Controller(ControllerConfig(edge=EdgeConfig(addr=Address("127.0.0.1", 0))))
        found["with the edge"] = loaded(*models)
        row = next(row for row in KINDS if row.kind == "Ingress")
        stored = row.parser({{"metadata": {{"name": "web", "namespace": "shop"}}}})
        found["parsed"] = [type(stored.ingress).__name__, stored.ingress.metadata.name]
        print(json.dumps(found))
        """
    )
    assert result["outbound only"] == []
    # The edge half imports them where it is built, and a row's parser on its first call.
    assert result["with the edge"] == sorted(EDGE_AND_GATEWAY_MODELS)
    assert result["parsed"] == ["Ingress", "web"]


def test_the_edge_modules_that_need_cryptography_load_when_a_moduleset_configures_one() -> None:
    result = _run(
        """
        import json
        from interlock.edge.modules import MissingSecretError, compile_modules
        from interlock.model.moduleset import Modules

        def compile(raw):
            try:
                compile_modules(Modules.model_validate(raw), {})
            except MissingSecretError as exc:
                return [str(exc)]

        found = {"imported": loaded(*CRYPTOGRAPHY)}
        compile({
            "ipRestriction": {"allow": ["10.0.0.0/8"]},
            "headers": {"request": {"add": {"X-Team": "shop"}}},
            "rateLimit": {"requests": 10, "period": "1m"},
        })
        found["other modules"] = loaded(*CRYPTOGRAPHY)
        found["mutualTLS error"] = compile(
            {"mutualTLS": {"caSecretRef": {"name": "cas", "key": "ca.crt"}}}
        )
        found["mutualTLS"] = loaded(*CRYPTOGRAPHY)
        found["oidc error"] = compile({"oidc": {
            "issuer": "https://id.example",
            "clientId": "shop",
            "clientSecret": {"name": "oidc", "key": "secret"},
        }})
        found["oidc"] = loaded(*CRYPTOGRAPHY)
        print(json.dumps(found))
        """
    )
    assert result == {
        "imported": [],
        "other modules": [],
        # Loaded by the module that needs it, and its errors still name the field.
        "mutualTLS error": ["mutualTLS.caSecretRef: Secret 'cas' with key 'ca.crt' is not present"],
        "mutualTLS": ["cryptography"],
        "oidc error": ["oidc.clientSecret: Secret 'oidc' with key 'secret' is not present"],
        "oidc": ["cryptography", "interlock.edge.modules.identity", "jwt"],
    }


def test_grpc_is_imported_only_when_the_grpc_api_is_served() -> None:
    # Memory at rest (issue 15): grpcio and protobuf are ~15 MiB of RSS a controller without
    # --grpc-addr never uses. Checked in a fresh interpreter: this one has imported them.
    code = """
import json, sys
from interlock.config import Address, ControllerConfig, LinkerdConfig
from interlock.controller.app import Controller
Controller(ControllerConfig())
Controller(ControllerConfig(linkerd=LinkerdConfig(grpc_addr=Address("127.0.0.1", 0))))
before = sorted(n for n in ("grpc", "google.protobuf") if n in sys.modules)
import interlock.api.grpc.server  # what Controller.start() imports for --grpc-addr
after = sorted(n for n in ("grpc", "google.protobuf") if n in sys.modules)
print(json.dumps([before, after]))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(out.stdout) == [[], ["google.protobuf", "grpc"]]


def test_the_controller_serves_metrics_without_prometheus_client() -> None:
    # Issue 29 item 5: prometheus-client (with wsgiref, http.server, gzip: 31 modules, 0.7 MiB of
    # RSS) only wrote the text interlock/api/exposition.py writes now.
    result = _run(
        """
        import json
        import interlock.cli
        from interlock.api.metrics import MetricsSources, metrics_registry

        text = metrics_registry(MetricsSources(ready=lambda: True)).exposition().decode()
        print(json.dumps({
            "imported": loaded("prometheus_client", "wsgiref", "http.server"),
            "served": [line for line in text.splitlines() if line.startswith("interlock_ready")],
        }))
        """
    )
    assert result == {"imported": [], "served": ["interlock_ready 1.0"]}


def test_pyyaml_and_the_kubeconfig_loader_load_only_when_a_kubeconfig_file_is_read() -> None:
    result = _run(
        """
        import asyncio, json, os, tempfile
        import interlock.controller.app
        from interlock.kube.client import make_api_client

        kubeconfig_modules = ("yaml", "kubernetes_asyncio.config.kube_config")
        found = {"imported": loaded(*kubeconfig_modules)}
        kubeconfig = '''
        apiVersion: v1
        kind: Config
        clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
        users: [{name: u, user: {token: t}}]
        contexts: [{name: x, context: {cluster: c, user: u}}]
        current-context: x
        '''

        async def main():
            with tempfile.TemporaryDirectory() as directory:
                path = os.path.join(directory, "config")
                with open(path, "w") as file:
                    file.write(kubeconfig)
                api = await make_api_client(kubeconfig=path, in_cluster=False)
                found["host"] = [api.configuration.host]
                await api.close()

        asyncio.run(main())
        found["read"] = loaded(*kubeconfig_modules)
        print(json.dumps(found))
        """
    )
    assert result == {
        "imported": [],
        "host": ["https://127.0.0.1:6443"],
        "read": ["kubernetes_asyncio.config.kube_config", "yaml"],
    }


def _run_without_plugin_setting(code: str) -> dict[str, list[str]]:
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    out = subprocess.run(
        [sys.executable, "-c", LOADED + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, list[str]] = json.loads(out.stdout)
    return result


PLUGIN_CHECK = """
    import json, os, sys
    {setup}
    from interlock.__main__ import pydantic_plugins
    pydantic_plugins.disable()
    import interlock.cli
    from interlock.model.service import Service
    from pydantic import BaseModel

    Service.model_validate({{"metadata": {{"name": "web", "namespace": "shop"}}}})
    found = {{
        "variable": [os.environ["PYDANTIC_DISABLE_PLUGINS"]],
        "after the first parse": loaded("importlib.metadata"),
    }}
    os.environ["PYDANTIC_DISABLE_PLUGINS"] = ""  # plugins on again: pydantic's loader looks
    type("Built", (BaseModel,), {{"__annotations__": {{"x": int}}}})
    found["plugins on"] = loaded("importlib.metadata")
    print(json.dumps(found))
"""


def test_the_program_turns_pydantic_plugins_off_without_importing_importlib_metadata() -> None:
    # Issue 29 item 5: pydantic's plugin loader imports importlib.metadata (about 1 MiB
    # of RSS) at the first model built, even with PYDANTIC_DISABLE_PLUGINS set.
    assert _run_without_plugin_setting(PLUGIN_CHECK.format(setup="")) == {
        "variable": ["__all__"],
        "after the first parse": [],
        "plugins on": ["importlib.metadata"],
    }


def test_an_operators_plugin_setting_is_kept() -> None:
    setup = 'os.environ["PYDANTIC_DISABLE_PLUGINS"] = "logfire"'
    assert _run_without_plugin_setting(PLUGIN_CHECK.format(setup=setup)) == {
        "variable": ["logfire"],
        # Some plugins kept on: pydantic's own loader, which reads the entry points.
        "after the first parse": ["importlib.metadata"],
        "plugins on": ["importlib.metadata"],
    }


def test_python_dash_m_interlock_starts_with_pydantic_plugins_off() -> None:
    # The program itself, as `python -m interlock` and the console script start it: the models
    # are built at import (`--version` exits after importing every subcommand).
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "interlock", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=True,
    )
    imported = {line.rpartition("|")[2].strip() for line in out.stderr.splitlines()}
    assert "interlock.model.service" in imported
    assert "pydantic._internal._model_construction" in imported
    assert "importlib.metadata" not in imported


AIOHTTP_WEB = (
    "aiohttp.web",
    "aiohttp.web_app",
    "aiohttp.web_urldispatcher",
    "aiohttp.web_runner",
    "aiohttp.web_fileresponse",
    "aiohttp.web_middlewares",
    "aiohttp.web_routedef",
    "aiohttp.web_ws",
    "aiohttp.web_server",
    "aiohttp.web_protocol",
    "aiohttp.web_request",
    "aiohttp.web_response",
    "aiohttp.web_exceptions",
    "aiohttp.web_log",
)
"""``aiohttp.web`` (2.2 MiB and 18 modules) and its low-level server (0.7 to 0.8 MiB, replaced
by ``interlock.api.http_server``; issue 29 item 5). The embedded API server and the edge's
admin API still use them."""


def test_interlock_run_serves_its_apis_without_any_of_aiohttp_web() -> None:
    result = _run(
        f"""
        import asyncio, json
        import interlock.cli
        from interlock.api.admin import AdminApp
        from interlock.api.metrics import controller_sources, mount_metrics
        from interlock.api.policy import build_policy_app
        from interlock.api.serving import serve
        from interlock.config import Address, ControllerConfig
        from interlock.controller.app import Controller

        web_modules = {AIOHTTP_WEB!r}
        found = {{"imported": loaded(*web_modules)}}

        async def get(port, path):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(f"GET {{path}} HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n"
                         "Connection: close\\r\\n\\r\\n".encode())
            status = (await reader.read()).split(b"\\r\\n")[0].decode()
            writer.close()
            return status

        async def main():
            # What Controller.start serves: the admin server with /metrics, the policy API.
            controller = Controller(ControllerConfig())
            admin = AdminApp(is_ready=lambda: True)
            mount_metrics(admin.app, controller_sources(controller))
            policy = build_policy_app(source=controller.watches)
            local = Address("127.0.0.1", 0)
            sites = [await serve(admin.app, local), await serve(policy, local)]
            found["answers"] = [
                await get(sites[0].address.port, "/metrics"),
                await get(sites[0].address.port, "/readyz"),
                await get(sites[1].address.port, "/v1/schema/outbound-policy.json"),
                await get(sites[1].address.port, "/missing"),
            ]
            for site in sites:
                await site.stop()
            found["served"] = loaded(*web_modules)
            # An aiohttp.web application (the demo's echo backends) is still served: then,
            # and only then, aiohttp.web loads.
            from aiohttp import web
            site = await serve(web.Application(), local)
            found["answers"].append(await get(site.address.port, "/missing"))
            await site.stop()
            found["application"] = loaded(*web_modules)

        asyncio.run(main())
        print(json.dumps(found))
        """
    )
    assert result == {
        "imported": [],
        "answers": ["HTTP/1.1 200 OK"] * 3 + ["HTTP/1.1 404 Not Found"] * 2,
        "served": [],
        "application": sorted(AIOHTTP_WEB),
    }


def test_the_command_line_imports_the_trace_viewer_and_difflib_only_when_they_are_used() -> None:
    # Issue 29 item 5: `interlock run` neither reads a trace (interlock.traceview, about 0.2 MiB
    # with its renderers) nor suggests a flag (difflib) unless the command line is mistyped.
    result = _run(
        """
        import contextlib, io, json, os, tempfile
        import interlock.cli
        from interlock.cli import build_parser

        found = {"imported": loaded("interlock.traceview", "difflib")}
        build_parser().parse_known_args(["run", "--policy-addr", "127.0.0.1:0"])
        found["parsed"] = loaded("interlock.traceview", "difflib")
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.suppress(SystemExit):
            interlock.cli.main(["run", "--polcy-addr", "127.0.0.1:0"])
        found["mistyped"] = [err.getvalue().strip().splitlines()[-1].split("(")[-1]]
        found["after mistyped"] = loaded("interlock.traceview", "difflib")
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "trace.jsonl")
            open(path, "w").close()
            with contextlib.redirect_stdout(io.StringIO()):
                found["trace"] = [interlock.cli.main(["trace", path])]
        found["after trace"] = loaded("interlock.traceview", "difflib")
        print(json.dumps(found))
        """
    )
    assert result == {
        "imported": [],
        "parsed": [],
        "mistyped": ["did you mean --policy-addr?)"],
        "after mistyped": ["difflib"],
        "trace": [0],
        "after trace": ["difflib", "interlock.traceview"],
    }
