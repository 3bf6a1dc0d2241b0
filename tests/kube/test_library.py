"""interlock.kube imports kubernetes-asyncio without its generated models, and the typed API the
tests (and any user code) use still works in the same process.

Each check runs in a fresh interpreter: what a module imports depends on what was imported before,
and this test process has imported kubernetes-asyncio in full already.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def _run(code: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_the_controller_imports_no_generated_api_or_model_module() -> None:
    result = _run(
        """
        import json, sys
        import interlock.controller.app
        import interlock.kube
        loaded = [m for m in sys.modules if m.startswith("kubernetes_asyncio.client.")]
        print(json.dumps({
            "models": [m for m in loaded if m.startswith("kubernetes_asyncio.client.models.")],
            "apis": [m for m in loaded if m.startswith("kubernetes_asyncio.client.api.")],
        }))
        """
    )
    assert result == {"models": [], "apis": []}


def test_the_typed_api_still_works_after_interlock_kube() -> None:
    result = _run(
        """
        import asyncio, json
        import interlock.kube
        from kubernetes_asyncio import client, config, watch
        import kubernetes_asyncio

        class Response:
            data = '{"metadata": {"name": "web", "namespace": "default"}}'

        async def main():
            api = client.ApiClient(configuration=client.Configuration())
            try:
                pod = api.deserialize(Response(), "V1Pod")
            finally:
                await api.close()
            print(json.dumps({
                "name": pod.metadata.name,
                "pod": client.V1Pod.__name__,
                "core": client.CoreV1Api.__name__,
                "meta": client.models.V1ObjectMeta.__name__,
                "watch": watch.Watch.__name__,
                "load_kube_config": callable(config.load_kube_config),
                "version": kubernetes_asyncio.__version__ == client.__version__,
                "same_client": interlock.kube.library.ApiClient is client.ApiClient,
            }))

        asyncio.run(main())
        """
    )
    assert result == {
        "name": "web",
        "pod": "V1Pod",
        "core": "CoreV1Api",
        "meta": "V1ObjectMeta",
        "watch": "Watch",
        "load_kube_config": True,
        "version": True,
        "same_client": True,
    }
