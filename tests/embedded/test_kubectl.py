"""The embedded server through the real kubectl binary, as a person at a terminal uses it.

Each test gets its own HOME so kubectl's discovery cache (``$HOME/.kube/cache``) never leaks
between tests, and kubectl runs as an asyncio subprocess so the server keeps serving it from
the test's own event loop.
"""

from __future__ import annotations

import asyncio
import base64
import shutil
from pathlib import Path

import pytest

from interlock.embedded import EmbeddedApiServer
from tests.kit.embedded_helpers import MODULESET_CRD, eventually, service

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"

pytestmark = pytest.mark.skipif(not Path(KUBECTL).exists(), reason="kubectl is not installed")

SERVICE_YAML = """\
apiVersion: v1
kind: Service
metadata:
  name: web
  labels: {{app: web}}
spec:
  selector: {{app: web}}
  ports:
  - name: http
    port: {port}
"""

ROUTE_YAML = """\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: web
spec:
  hostnames: [{hostname}]
  parentRefs: [{{kind: Service, group: "", name: web, port: 80}}]
"""


class Kubectl:
    def __init__(self, server: EmbeddedApiServer, home: Path) -> None:
        self.env = {
            "HOME": str(home),
            "KUBECONFIG": str(server.write_kubeconfig(home / "kubeconfig")),
            "PATH": "/usr/bin:/bin",
        }
        self.home = home

    async def __call__(self, *args: str, check: bool = True) -> tuple[int, str, str]:
        process = await asyncio.create_subprocess_exec(
            KUBECTL,
            *args,
            env=self.env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
        code = process.returncode
        assert code is not None
        if check:
            assert code == 0, f"kubectl {' '.join(args)} failed ({code}): {err.decode()}"
        return code, out.decode(), err.decode()

    def write(self, name: str, text: str) -> str:
        path = self.home / name
        path.write_text(text)
        return str(path)

    async def apply_refused(self, name: str, text: str) -> str:
        """``kubectl apply -f`` of ``text`` (written to ``name``), which must exit 1: its stderr."""
        code, _, err = await self("apply", "-f", self.write(name, text), check=False)
        assert code == 1, f"kubectl apply of {name} was not refused: {err}"
        return err


@pytest.fixture
def kubectl(api_server: EmbeddedApiServer, tmp_path: Path) -> Kubectl:
    return Kubectl(api_server, tmp_path)


def _rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()]


async def test_get_all_namespaces_prints_the_usual_columns(
    api_server: EmbeddedApiServer, kubectl: Kubectl
) -> None:
    api_server.store.create(service("web"))
    api_server.store.create(service("dns", namespace="kube-system", port=53))
    _, out, err = await kubectl("get", "services", "-A")
    rows = _rows(out)
    assert rows[0] == ["NAMESPACE", "NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    assert [(r[0], r[1], r[2], r[5]) for r in rows[1:]] == [
        ("default", "web", "ClusterIP", "80/TCP"),
        ("kube-system", "dns", "ClusterIP", "53/TCP"),
    ]
    assert err == ""
    _, out, _ = await kubectl("get", "ns")
    assert _rows(out)[1][:2] == ["default", "Active"]


async def test_apply_twice_creates_then_patches(
    api_server: EmbeddedApiServer, kubectl: Kubectl
) -> None:
    path = kubectl.write(
        "app.yaml", SERVICE_YAML.format(port=80) + "---\n" + ROUTE_YAML.format(hostname="a.example")
    )
    _, out, err = await kubectl("apply", "-f", path)
    assert out.splitlines() == [
        "service/web created",
        "httproute.gateway.networking.k8s.io/web created",
    ]
    assert err == ""
    kubectl.write(
        "app.yaml",
        SERVICE_YAML.format(port=8080) + "---\n" + ROUTE_YAML.format(hostname="b.example"),
    )
    _, out, err = await kubectl("apply", "-f", path)
    assert out.splitlines() == [
        "service/web configured",
        "httproute.gateway.networking.k8s.io/web configured",
    ]
    assert err == ""
    svc = api_server.store.get(api_version="v1", kind="Service", namespace="default", name="web")
    assert [(p["port"], p["protocol"]) for p in svc["spec"]["ports"]] == [(8080, "TCP")]
    assert "kubectl.kubernetes.io/last-applied-configuration" in svc["metadata"]["annotations"]
    route = api_server.store.get(
        api_version="gateway.networking.k8s.io/v1",
        kind="HTTPRoute",
        namespace="default",
        name="web",
    )
    assert route["spec"]["hostnames"] == ["b.example"]
    assert route["metadata"]["generation"] == 2
    _, out, _ = await kubectl("apply", "-f", path)
    assert out.splitlines() == [
        "service/web unchanged",
        "httproute.gateway.networking.k8s.io/web unchanged",
    ]


async def test_create_refuses_an_existing_object_and_delete_removes_it(
    api_server: EmbeddedApiServer, kubectl: Kubectl
) -> None:
    path = kubectl.write("svc.yaml", SERVICE_YAML.format(port=80))
    _, out, _ = await kubectl("create", "-f", path)
    assert out.strip() == "service/web created"
    code, _, err = await kubectl("create", "-f", path, check=False)
    assert code == 1
    assert 'services "web" already exists' in err
    _, out, _ = await kubectl("delete", "service", "web")
    assert out.strip() == 'service "web" deleted'
    assert api_server.store.list(api_version="v1", kind="Service", namespace="default") == []


async def test_invalid_objects_are_refused_with_the_field(kubectl: Kubectl) -> None:
    err = await kubectl.apply_refused("svc.yaml", SERVICE_YAML.format(port=70000))
    assert "spec.ports[0].port" in err and "must be between 1 and 65535" in err


async def test_get_watch_prints_changes_as_they_happen(
    api_server: EmbeddedApiServer, kubectl: Kubectl
) -> None:
    process = await asyncio.create_subprocess_exec(
        KUBECTL,
        "get",
        "services",
        "--watch",
        "--output-watch-events",
        env=kubectl.env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    lines: list[str] = []

    async def read_line() -> str:
        line = (await asyncio.wait_for(process.stdout.readline(), 120)).decode()  # type: ignore[union-attr]
        lines.append(line)
        return line

    try:

        async def watching() -> bool:
            # kubectl prints "No resources found" to stderr once its watch is open.
            return api_server.store.statistics()["watches"] >= 1

        await eventually(watching, within=30)
        api_server.store.create(service("web"))
        assert (await read_line()).split()[:2] == ["EVENT", "NAME"]
        assert (await read_line()).split()[:3] == ["ADDED", "web", "ClusterIP"]
        api_server.store.delete(api_version="v1", kind="Service", namespace="default", name="web")
        assert (await read_line()).split()[:2] == ["DELETED", "web"]
    finally:
        process.terminate()
        await process.wait()


async def test_get_httproutes_shows_hostnames(
    api_server: EmbeddedApiServer, kubectl: Kubectl
) -> None:
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"hostnames": ["web.example"]},
    }
    api_server.store.create(route)
    _, out, _ = await kubectl("get", "httproutes")
    rows = _rows(out)
    assert rows[0] == ["NAME", "HOSTNAMES", "AGE"]
    assert rows[1][:2] == ["web", '["web.example"]']


async def test_get_modulesets_after_applying_the_crd(
    api_server: EmbeddedApiServer, kubectl: Kubectl
) -> None:
    import yaml

    crd_path = kubectl.write("crd.yaml", yaml.safe_dump(MODULESET_CRD))
    _, out, _ = await kubectl("apply", "-f", crd_path)
    assert (
        out.strip()
        == "customresourcedefinition.apiextensions.k8s.io/modulesets.interlock.dev created"
    )
    moduleset = kubectl.write(
        "ms.yaml",
        "apiVersion: interlock.dev/v1alpha1\nkind: ModuleSet\nmetadata: {name: gzip}\n"
        "spec: {modules: {compression: {enabled: true}}}\n",
    )
    _, out, _ = await kubectl("apply", "-f", moduleset)
    assert out.strip() == "moduleset.interlock.dev/gzip created"
    api_server.store.patch(
        api_version="interlock.dev/v1alpha1",
        kind="ModuleSet",
        namespace="default",
        name="gzip",
        patch={"status": {"conditions": [{"type": "Valid", "status": "True"}]}},
        subresource="status",
    )
    _, out, _ = await kubectl("get", "modulesets")
    rows = _rows(out)
    assert rows[0] == ["NAME", "VALID", "AGE"]
    assert rows[1][:2] == ["gzip", "True"]
    _, out, _ = await kubectl(
        "get", "ms", "gzip", "-o", "jsonpath={.spec.modules.compression.enabled}"
    )
    assert out == "true"


async def test_unknown_fields_of_a_custom_resource_are_refused_or_dropped(kubectl: Kubectl) -> None:
    import yaml

    await kubectl("apply", "-f", kubectl.write("crd.yaml", yaml.safe_dump(MODULESET_CRD)))
    err = await kubectl.apply_refused(
        "ms.yaml",
        "apiVersion: interlock.dev/v1alpha1\nkind: ModuleSet\nmetadata: {name: gzip}\n"
        "spec: {modules: {compression: {enabled: true, levle: 3}}}\n",
    )
    assert 'strict decoding error: unknown field "spec.modules.compression.levle"' in err
    path = str(kubectl.home / "ms.yaml")
    _, out, err = await kubectl("apply", "-f", path, "--validate=warn")
    assert out.strip() == "moduleset.interlock.dev/gzip created"
    assert 'Warning: unknown field "spec.modules.compression.levle"' in err
    _, out, _ = await kubectl("get", "ms", "gzip", "-o", "jsonpath={.spec}")
    assert out == '{"modules":{"compression":{"enabled":true}}}'


async def test_a_custom_resource_before_its_crd_gets_kubectls_usual_hint(kubectl: Kubectl) -> None:
    err = await kubectl.apply_refused(
        "ms.yaml",
        "apiVersion: interlock.dev/v1alpha1\nkind: ModuleSet\nmetadata: {name: gzip}\n"
        "spec: {modules: {compression: {enabled: true}}}\n",
    )
    assert 'no matches for kind "ModuleSet" in version "interlock.dev/v1alpha1"' in err
    assert "ensure CRDs are installed first" in err


async def test_a_misspelt_service_field_is_refused(
    api_server: EmbeddedApiServer, kubectl: Kubectl
) -> None:
    err = await kubectl.apply_refused(
        "svc.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: web}\n"
        "spec: {prots: [{port: 8080}], ports: [{port: 80}]}\n",
    )
    assert 'Service in version "v1" cannot be handled as a Service' in err
    assert 'unknown field "spec.prots"' in err
    assert api_server.store.list(api_version="v1", kind="Service") == []


async def test_kubectl_create_generators_send_protobuf_and_are_understood(
    api_server: EmbeddedApiServer, kubectl: Kubectl
) -> None:
    htpasswd = kubectl.write("htpasswd", "user:$2y$05$abcdefghijklmnopqrstuv\n")
    await kubectl("create", "namespace", "shop")
    await kubectl(
        "create", "secret", "generic", "users", f"--from-file=htpasswd={htpasswd}", "-n", "shop"
    )
    await kubectl("create", "service", "clusterip", "web", "--tcp=80:8080", "-n", "shop")
    await kubectl(
        "create",
        "ingress",
        "demo",
        "--class=interlock",
        "--rule=demo.localhost/*=web:80,tls=cert",
        "--annotation=interlock.dev/modules=gzip",
        "-n",
        "shop",
    )
    secret = api_server.store.get(api_version="v1", kind="Secret", namespace="shop", name="users")
    assert base64.b64decode(secret["data"]["htpasswd"]).decode().startswith("user:$2y$05$")
    svc = api_server.store.get(api_version="v1", kind="Service", namespace="shop", name="web")
    assert svc["spec"]["ports"] == [
        {"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}
    ]
    assert svc["spec"]["selector"] == {"app": "web"}
    ingress = api_server.store.get(
        api_version="networking.k8s.io/v1", kind="Ingress", namespace="shop", name="demo"
    )
    assert ingress["metadata"]["annotations"] == {"interlock.dev/modules": "gzip"}
    assert ingress["spec"]["rules"][0]["http"]["paths"][0] == {
        "path": "/",
        "pathType": "Prefix",
        "backend": {"service": {"name": "web", "port": {"number": 80}}},
    }
    assert ingress["spec"]["tls"] == [{"hosts": ["demo.localhost"], "secretName": "cert"}]


async def test_kubectl_apply_after_loading_manifests_sees_them_as_applied(
    api_server: EmbeddedApiServer, kubectl: Kubectl
) -> None:
    path = kubectl.write("svc.yaml", SERVICE_YAML.format(port=80))
    report = await api_server.apply_manifests([path])
    assert report.ok
    _, out, err = await kubectl("apply", "-f", path)
    assert out.strip() == "service/web unchanged"
    assert "last-applied-configuration" not in err
