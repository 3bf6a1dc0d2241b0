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


def test_what_configuration_and_apiclient_import_for_unused_code_loads_when_used() -> None:
    # Issue 29 item 5: urllib3 (basic auth), dateutil's parser (a typed model's date) and
    # multiprocessing.pool (async_req) are 3.8 MiB of RSS at start-up that the controller's raw
    # requests never use; each loads, and works, when kubernetes-asyncio's code calls it.
    result = _run(
        """
        import asyncio, json, sys
        import interlock.controller.app
        from interlock.kube.library import ApiClient, Configuration

        heavy = {
            "urllib3": "urllib3.poolmanager",
            "dateutil": "dateutil.parser._parser",
            "pool": "multiprocessing.connection",
        }
        def loaded():
            return sorted(name for name, module in heavy.items() if module in sys.modules)

        async def main():
            found = {"imported": loaded()}
            configuration = Configuration()
            configuration.username, configuration.password = "user", "secret"
            found["basic"] = configuration.get_basic_auth_token()
            api = ApiClient(configuration=configuration)
            try:
                found["date"] = str(api.deserialize(
                    type("Response", (), {"data": '"2026-12-02T13:00:00Z"'})(), "datetime"
                ))
                found["pool"] = type(api.pool).__name__
            finally:
                await api.close()
            found["used"] = loaded()
            from dateutil.parser import parse
            from multiprocessing.pool import ThreadPool
            import urllib3
            found["real"] = [parse.__module__, ThreadPool.__module__, urllib3.__version__ > ""]
            print(json.dumps(found))

        asyncio.run(main())
        """
    )
    assert result == {
        "imported": [],
        "basic": "Basic dXNlcjpzZWNyZXQ=",
        "date": "2026-12-02 13:00:00+00:00",
        "pool": "ThreadPool",
        "used": ["dateutil", "pool", "urllib3"],
        "real": ["dateutil.parser._parser", "multiprocessing.pool", True],
    }
