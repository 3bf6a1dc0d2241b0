"""An embedded Kubernetes API server: run interlock with no cluster, and test against it.

Faithful enough that the real kubernetes-asyncio client and the real kubectl work unchanged:
CRUD, list and watch with resourceVersions, bookmarks and 410 Expired, patches, finalizers,
status subresources, CRDs, discovery, OpenAPI v3 and server-side Tables. See docs/embedded.md.
"""

from interlock.embedded.audit import AuditLog, AuditRecord
from interlock.embedded.errors import ApiError
from interlock.embedded.faults import Faults
from interlock.embedded.manifests import DocumentResult, ManifestReport
from interlock.embedded.registry import PrinterColumn, Registry, ResourceType
from interlock.embedded.server import EmbeddedApiServer, running_api_server, serve_forever
from interlock.embedded.store import ObjectStore

__all__ = [
    "ApiError",
    "AuditLog",
    "AuditRecord",
    "DocumentResult",
    "EmbeddedApiServer",
    "Faults",
    "ManifestReport",
    "ObjectStore",
    "PrinterColumn",
    "Registry",
    "ResourceType",
    "running_api_server",
    "serve_forever",
]
