"""Programming one route on an edge provider the way an edge actor does, for edge tests.

An edge actor applies a route's modules first (a new route answers 503) and only then attaches
its backend; tests that need a served route do the same through :func:`serve_route`, one
helper instead of the two calls written out in every test module. Shared like
``edge_objects.py`` (``tests/`` is on the import path through the root ``conftest.py``).
"""

from __future__ import annotations

from collections.abc import Mapping

from interlock.edge.provider import ApplyModules, BackendTarget, EdgeProvider, PathType
from interlock.model.moduleset import Modules, SecretValue


async def serve_route(
    edge: EdgeProvider,
    *,
    host: str,
    route_id: str = "root",
    path: str = "/",
    path_type: PathType = "Prefix",
    modules: Modules | None = None,
    secrets: Mapping[tuple[str, str], SecretValue] | None = None,
    backend: BackendTarget | None = None,
) -> None:
    """Apply ``modules`` (none by default) to the route, then attach ``backend`` if given."""
    await edge.apply_modules(
        ApplyModules(
            host=host,
            route_id=route_id,
            path=path,
            path_type=path_type,
            modules=modules or Modules(),
            secrets=secrets or {},
        )
    )
    if backend is not None:
        await edge.attach_backend(host=host, route_id=route_id, backend=backend)
