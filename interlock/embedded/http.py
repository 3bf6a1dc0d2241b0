"""The HTTP face of the embedded API server: Kubernetes REST paths onto the object store.

One catch-all aiohttp handler parses ``/api/v1/...`` and ``/apis/GROUP/VERSION/...`` paths
itself, because whether ``/api/v1/namespaces/x/status`` is a namespace's status or a list of
``status`` objects in namespace ``x`` depends on the registry, which changes at run time as CRDs
come and go. Everything else here is content negotiation (JSON, Table, PartialObjectMetadata),
query parameters as clients really send them (kubernetes-asyncio writes ``True``), fault
injection and the audit log in front of it all; watch streams are written by
:mod:`~interlock.embedded.watch_stream`.

Before anything, the ``Host`` must name this server (an IP address, localhost or an allowed
name; :mod:`interlock.model.allowed_hosts`, against DNS rebinding): else 421 and a Status.
Authentication comes next, as in kube-apiserver: a request without ``Authorization: Bearer``
and the server's token (compared in constant time) is answered 401 with kube-apiserver's
``Unauthorized`` Status, whatever it asks. Only ``/healthz``, ``/livez``, ``/readyz`` and
``/version`` answer anyone, as a real server's anonymous access restricted to those paths does:
they reveal nothing stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import traceback
from collections.abc import Callable
from dataclasses import InitVar, dataclass, field
from typing import Any

import yaml
from aiohttp import web
from loguru import logger

from interlock.embedded import discovery, openapi
from interlock.embedded.audit import AuditLog, AuditRecord
from interlock.embedded.errors import ApiError, bad_request
from interlock.embedded.faults import Faults
from interlock.embedded.objects import StoredObject, encode
from interlock.embedded.protobuf import PROTOBUF, decode_object
from interlock.embedded.registry import Registry, ResourceType
from interlock.embedded.selectors import FIELD_LABELS, parse_field_selector, parse_label_selector
from interlock.embedded.store import ObjectStore, WriteOptions
from interlock.embedded.table import (
    partial_metadata,
    render_table,
    wants_partial_metadata,
    wants_table,
)
from interlock.embedded.watch_stream import WatchStreams, query_flag
from interlock.embedded.watches import WatchFilter
from interlock.model.allowed_hosts import AllowedHosts, refusal

JSON = "application/json"
_PUBLIC_PATHS = frozenset(("/healthz", "/livez", "/readyz", "/version"))
"""What kube-apiserver's ``system:public-info-viewer`` lets anonymous clients read."""
UNAUTHORIZED = ApiError(401, "Unauthorized")
"""kube-apiserver's answer to a request it cannot authenticate (no ``details``)."""
_NAMESPACE_SUBRESOURCES = ("status", "finalize")


def _no_such_path(path: str) -> ApiError:
    return ApiError(404, f"the server could not find the requested resource ({path})", details={})


def _no_duplicate_fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise bad_request(f'strict decoding error: json: duplicate field "{key}"')
        seen[key] = value
    return seen


def _unsupported_option(kind: str, field: str, value: Any, supported: tuple[str, ...]) -> ApiError:
    """422 for a request option out of its set, shaped as kube-apiserver's (meta.k8s.io)."""
    listed = ", ".join(f'"{v}"' for v in supported)
    message = f'{field}: Unsupported value: "{value}": supported values: {listed}'
    return ApiError(
        422,
        f'{kind}.meta.k8s.io "" is invalid: {message}',
        details={
            "group": "meta.k8s.io",
            "kind": kind,
            "causes": [{"reason": "FieldValueNotSupported", "message": message, "field": field}],
        },
    )


def _json_response(body: Any, *, status: int = 200, content_type: str = JSON) -> web.Response:
    data = body if isinstance(body, bytes) else encode(body)
    return web.Response(body=data, status=status, headers={"Content-Type": content_type})


def error_response(error: ApiError, *, retry_after: int | None = None) -> web.Response:
    response = _json_response(error.status(), status=error.code)
    if retry_after is not None:
        response.headers["Retry-After"] = str(retry_after)
    return response


@dataclass(frozen=True, slots=True)
class ResourceRequest:
    """A request for objects of one kind, parsed from its path."""

    rtype: ResourceType
    version: str
    namespace: str | None
    name: str | None
    subresource: str | None

    @property
    def api_version(self) -> str:
        return self.rtype.api_version(self.version)


def request_verb(method: str, path: str, query: dict[str, str]) -> str:
    """The Kubernetes verb of a request, as fault rules and audit logs name it."""
    segments = [s for s in path.split("/") if s]
    if method == "GET":
        # Item paths end in a name: /api/v1/namespaces/NS/KIND/NAME or /api/v1/KIND/NAME.
        is_item = _looks_like_item(segments)
        if is_item:
            return "get"
        return "watch" if query_flag(query.get("watch")) else "list"
    return {
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete" if _looks_like_item(segments) else "deletecollection",
    }.get(method, method.lower())


def _looks_like_item(segments: list[str]) -> bool:
    if not segments or segments[0] not in ("api", "apis"):
        return False
    rest = segments[2:] if segments[0] == "api" else segments[3:]
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in _NAMESPACE_SUBRESOURCES:
        rest = rest[2:]
    return len(rest) >= 2


@dataclass(kw_only=True, eq=False)
class ApiHandler:
    """Serves every request of the embedded API server."""

    store: ObjectStore
    registry: Registry
    faults: Faults
    audit: AuditLog
    bookmark_interval: InitVar[float]
    server_address: Callable[[], str]
    token: str
    """The bearer token every request but the public probes must carry."""
    allowed_hosts: AllowedHosts
    _expected: bytes = field(init=False)
    _watches: WatchStreams = field(init=False)
    _stopping: asyncio.Event = field(default_factory=asyncio.Event, init=False)

    def __post_init__(self, bookmark_interval: float) -> None:
        self._expected = self.token.encode()
        self._watches = WatchStreams(store=self.store, bookmark_interval=bookmark_interval)

    def reset(self) -> None:
        """Serve again after :meth:`stopping`."""
        self._stopping = asyncio.Event()

    def stopping(self) -> None:
        """End injected delays now, so a stop does not wait for them."""
        self._stopping.set()

    def application(self) -> web.Application:
        app = web.Application(client_max_size=32 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        query = dict(request.query)
        path = request.path.rstrip("/") or "/"
        verb = request_verb(request.method, path, query)
        host = request.headers.get("Host")
        response: web.StreamResponse
        if not self.allowed_hosts.allows(host):
            assert host is not None
            response = error_response(
                ApiError(421, refusal(host, flag="--allowed-host").strip(), reason="BadRequest")
            )
        elif self._authenticated(request) or path in _PUBLIC_PATHS:
            response = await self._answer(request, path, query, verb)
        else:
            response = error_response(UNAUTHORIZED)
        self.audit.record(
            AuditRecord(
                method=request.method,
                verb=verb,
                path=path,
                query=request.query_string,
                status=response.status,
            )
        )
        return response

    def _authenticated(self, request: web.Request) -> bool:
        # As kube-apiserver's bearer-token authenticator reads the header: the scheme in any
        # case, the token trimmed.
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        given = token.strip().encode("utf-8", "replace")
        return scheme.lower() == "bearer" and hmac.compare_digest(given, self._expected)

    async def _answer(
        self, request: web.Request, path: str, query: dict[str, str], verb: str
    ) -> web.StreamResponse:
        fault = self.faults.for_request(verb=verb, path=path)
        if fault is not None:
            if fault.delay:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), fault.delay)
            if fault.error is not None:
                return error_response(fault.error, retry_after=fault.retry_after)
        try:
            return await self._dispatch(request, path, query)
        except ApiError as error:
            return error_response(error)
        except Exception as error:
            # A bug of ours must still answer with a Status body; the traceback is logged
            # without local variables (loguru's "diagnose" would print request bodies).
            logger.error(
                "embedded API server: {} {} failed:\n{}",
                request.method,
                path,
                "".join(traceback.format_exception(error)),
            )
            return error_response(ApiError(500, f"Internal error occurred: {type(error).__name__}"))

    # -- routing -----------------------------------------------------------------------------

    async def _dispatch(
        self, request: web.Request, path: str, query: dict[str, str]
    ) -> web.StreamResponse:
        segments = [s for s in path.split("/") if s]
        accept = request.headers.get("Accept", "")
        if path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok")
        if path == "/version":
            return _json_response(discovery.KUBERNETES_VERSION)
        if segments[:2] == ["openapi", "v3"]:
            return self._openapi(segments[2:])
        if segments == ["openapi", "v2"]:
            return self._openapi_v2(accept)
        if segments and segments[0] in ("api", "apis"):
            if request.method == "GET":
                document = self._discovery(segments, accept)
                if document is not None:
                    return document
            parsed = self._parse_resource_path(segments)
            return await self._resource(request, parsed, query, accept)
        raise _no_such_path(f"{path}")

    def _discovery(self, segments: list[str], accept: str) -> web.Response | None:
        if segments == ["api"]:
            if discovery.wants_aggregated(accept):
                body = discovery.aggregated_discovery(self.registry, core=True)
                return _json_response(body, content_type=discovery.AGGREGATED_V2)
            return _json_response(discovery.api_versions(self.server_address()))
        if segments == ["apis"]:
            if discovery.wants_aggregated(accept):
                body = discovery.aggregated_discovery(self.registry, core=False)
                return _json_response(body, content_type=discovery.AGGREGATED_V2)
            return _json_response(discovery.api_group_list(self.registry))
        if segments[0] == "api" and len(segments) == 2:
            document = discovery.api_resource_list(self.registry, "", segments[1])
            if document is None:
                raise _no_such_path(f"/api/{segments[1]}")
            return _json_response(document)
        if segments[0] == "apis" and len(segments) == 2:
            versions = self.registry.group_versions().get(segments[1])
            if not versions:
                # kube-apiserver's mux answers an unknown group in plain text.
                return web.Response(
                    status=404,
                    text="404 page not found\n",
                    headers={"Content-Type": "text/plain; charset=utf-8"},
                )
            return _json_response(discovery.api_group(segments[1], versions))
        if segments[0] == "apis" and len(segments) == 3:
            document = discovery.api_resource_list(self.registry, segments[1], segments[2])
            if document is None:
                raise _no_such_path(f"/apis/{segments[1]}/{segments[2]}")
            return _json_response(document)
        return None

    @staticmethod
    def _openapi_v2(accept: str) -> web.Response:
        """An OpenAPI v2 document that describes no kind.

        kubectl falls back to v2 to validate a kind the v3 documents do not cover (a custom
        resource whose CRD is not installed yet). An empty document makes it skip that
        validation and report what a real server's answer leads to: "no matches for kind ...
        ensure CRDs are installed first", rather than a 404. The protobuf form of an empty
        document is zero bytes.
        """
        if "protobuf" in accept:
            return web.Response(
                body=b"",
                headers={
                    "Content-Type": "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
                },
            )
        document = {
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1.32.0"},
            "paths": {},
            "definitions": {},
        }
        return _json_response(document)

    def _openapi(self, segments: list[str]) -> web.Response:
        if not segments:
            return _json_response(openapi.openapi_index(self.registry))
        if segments[0] == "api" and len(segments) == 2:
            group, version = "", segments[1]
        elif segments[0] == "apis" and len(segments) == 3:
            group, version = segments[1], segments[2]
        else:
            raise ApiError(404, "the server could not find the requested OpenAPI document")
        document = openapi.group_version_document(self.registry, group, version)
        if document is None:
            raise ApiError(404, "the server could not find the requested OpenAPI document")
        return _json_response(document)

    def _parse_resource_path(self, segments: list[str]) -> ResourceRequest:
        if segments[0] == "api" and len(segments) >= 2:
            group, version, rest = "", segments[1], segments[2:]
        elif segments[0] == "apis" and len(segments) >= 3:
            group, version, rest = segments[1], segments[2], segments[3:]
        else:
            raise _no_such_path(f"/{'/'.join(segments)}")
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in _NAMESPACE_SUBRESOURCES:
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise _no_such_path(f"/{'/'.join(segments)}")
        rtype = self.registry.by_plural(group=group, version=version, plural=rest[0])
        if rtype is None:
            raise _no_such_path(f"/{'/'.join(segments)}")
        if namespace is not None and not rtype.namespaced:
            raise _no_such_path(f"/{'/'.join(segments)}")
        return ResourceRequest(
            rtype=rtype,
            version=version,
            namespace=namespace,
            name=rest[1] if len(rest) >= 2 else None,
            subresource=rest[2] if len(rest) == 3 else None,
        )

    # -- verbs -------------------------------------------------------------------------------

    async def _resource(
        self, request: web.Request, parsed: ResourceRequest, query: dict[str, str], accept: str
    ) -> web.StreamResponse:
        method = request.method
        dry_run = bool(query.get("dryRun"))
        field_validation = query.get("fieldValidation") or "Warn"
        if field_validation not in ("Ignore", "Warn", "Strict"):
            kinds = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions"}
            raise _unsupported_option(
                kinds.get(request.method, "CreateOptions"),
                "fieldValidation",
                field_validation,
                ("Ignore", "Strict", "Warn"),
            )
        if field_validation not in ("Ignore", "Warn", "Strict"):
            raise bad_request(
                f'fieldValidation: invalid value "{field_validation}": must be Ignore, Warn or '
                "Strict"
            )
        warnings: list[str] = []
        write = WriteOptions(dry_run=dry_run, field_validation=field_validation, warnings=warnings)
        if parsed.name is None:
            if method == "GET":
                if query_flag(query.get("watch")):
                    if parsed.name is not None:
                        raise bad_request(
                            "watch a single object with fieldSelector=metadata.name=NAME"
                        )
                    return await self._watches.serve(
                        request,
                        rtype=parsed.rtype,
                        api_version=parsed.api_version,
                        where=self._filter(parsed, query),
                        query=query,
                        accept=accept,
                    )
                return self._list(parsed, query, accept)
            if method == "POST":
                body = await self._body(request, strict=field_validation == "Strict")
                stored = self.store.create_object(
                    parsed.rtype,
                    version=parsed.version,
                    namespace=parsed.namespace,
                    body=body,
                    options=write,
                )
                return self._object_response(parsed, stored, accept, status=201, warnings=warnings)
            if method == "DELETE":
                return self._delete_collection(parsed, query)
            raise ApiError(405, f"{method} is not supported on a collection")
        if parsed.rtype.namespaced and parsed.namespace is None:
            raise _no_such_path(f"{request.path}")
        if parsed.subresource not in (None, "status"):
            raise _no_such_path(f"{request.path}")
        if method == "GET":
            stored = self.store.read(parsed.rtype, namespace=parsed.namespace, name=parsed.name)
            return self._object_response(parsed, stored, accept)
        if method == "PUT":
            body = await self._body(request, strict=field_validation == "Strict")
            stored = self.store.update_object(
                parsed.rtype,
                version=parsed.version,
                namespace=parsed.namespace,
                name=parsed.name,
                body=body,
                subresource=parsed.subresource,
                options=write,
            )
            return self._object_response(parsed, stored, accept, warnings=warnings)
        if method == "PATCH":
            content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
            body = await self._body(request)
            stored = self.store.patch_object(
                parsed.rtype,
                version=parsed.version,
                namespace=parsed.namespace,
                name=parsed.name,
                patch=body,
                content_type=content_type,
                subresource=parsed.subresource,
                options=write,
            )
            return self._object_response(parsed, stored, accept, warnings=warnings)
        if method == "DELETE":
            options = await self._body(request, allow_empty=True) or {}
            if not isinstance(options, dict):
                raise bad_request("DeleteOptions must be a JSON object")
            dry_run = dry_run or bool(options.get("dryRun"))
            policy = options.get("propagationPolicy") or query.get("propagationPolicy")
            if policy not in (None, "Orphan", "Background", "Foreground"):
                raise _unsupported_option(
                    "DeleteOptions",
                    "propagationPolicy",
                    policy,
                    ("Background", "Foreground", "Orphan"),
                )
            stored, gone = self.store.delete_object(
                parsed.rtype,
                namespace=parsed.namespace,
                name=parsed.name,
                preconditions=options.get("preconditions"),
                dry_run=dry_run,
            )
            # kube-apiserver answers a completed delete with a Status, except for the kinds
            # whose storage returns the deleted object (Services).
            if gone and parsed.rtype.key != ("", "services"):
                details = {
                    "name": stored.name,
                    "kind": parsed.rtype.plural,
                    "uid": stored.obj["metadata"].get("uid"),
                }
                if parsed.rtype.group:
                    details["group"] = parsed.rtype.group
                return _json_response(
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "metadata": {},
                        "status": "Success",
                        "details": details,
                    }
                )
            return self._object_response(parsed, stored, accept)
        raise ApiError(405, f"{method} is not supported")

    async def _body(
        self, request: web.Request, *, allow_empty: bool = False, strict: bool = False
    ) -> Any:
        """The decoded body; ``strict`` (fieldValidation=Strict): a duplicate field is a 400."""
        raw = await request.read()
        if not raw.strip():
            if allow_empty:
                return None
            raise bad_request("the request has no body")
        content_type = request.headers.get("Content-Type", "")
        if content_type.startswith(PROTOBUF):
            return decode_object(raw)
        try:
            if "yaml" in content_type:
                return yaml.safe_load(raw)
            if strict:
                return json.loads(raw, object_pairs_hook=_no_duplicate_fields)
            return json.loads(raw)
        except (ValueError, yaml.YAMLError) as error:
            raise bad_request(f"the request body is not valid JSON: {error}") from None

    def _object_response(
        self,
        parsed: ResourceRequest,
        stored: StoredObject,
        accept: str,
        *,
        status: int = 200,
        warnings: list[str] | None = None,
    ) -> web.Response:
        response = self._object_body(parsed, stored, accept, status=status)
        for warning in warnings or ():
            # RFC 7234 warn-code 299 is how kube-apiserver sends warnings; kubectl prints them.
            escaped = warning.replace("\\", "\\\\").replace('"', '\\"')
            response.headers.add("Warning", f'299 - "{escaped}"')
        return response

    def _object_body(
        self, parsed: ResourceRequest, stored: StoredObject, accept: str, *, status: int
    ) -> web.Response:
        if wants_table(accept):
            table = render_table(
                parsed.rtype,
                [stored.copy(parsed.api_version)],
                now=self.store.now(),
                include_object="Metadata",
                metadata={"resourceVersion": str(stored.rv)},
            )
            return _json_response(table, status=status)
        if wants_partial_metadata(accept):
            return _json_response(partial_metadata(stored.copy()), status=status)
        return _json_response(stored.encoded(parsed.api_version), status=status)

    def _filter(self, parsed: ResourceRequest, query: dict[str, str]) -> WatchFilter:
        return WatchFilter(
            namespace=parsed.namespace,
            label_selector=parse_label_selector(query.get("labelSelector")),
            field_selector=parse_field_selector(
                query.get("fieldSelector"),
                allowed=FIELD_LABELS.get(parsed.rtype.key, frozenset()),
            ),
        )

    def _list(self, parsed: ResourceRequest, query: dict[str, str], accept: str) -> web.Response:
        if query.get("resourceVersionMatch") and not query.get("resourceVersion"):
            raise ApiError(
                422,
                'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
                details={
                    "group": "meta.k8s.io",
                    "kind": "ListOptions",
                    "causes": [
                        {
                            "reason": "FieldValueForbidden",
                            "message": "Forbidden: resourceVersionMatch is forbidden unless "
                            "resourceVersion is provided",
                            "field": "resourceVersionMatch",
                        }
                    ],
                },
            )
        limit_text = query.get("limit")
        try:
            limit = int(limit_text) if limit_text else None
        except ValueError:
            raise bad_request(f"limit: invalid value {limit_text!r}") from None
        if query.get("resourceVersion") == "0":
            limit = None  # served from kube-apiserver's watch cache, which ignores the limit
        page = self.store.list_objects(
            parsed.rtype,
            where=self._filter(parsed, query),
            limit=limit if limit and limit > 0 else None,
            continue_token=query.get("continue") or None,
        )
        items = page.items
        metadata: dict[str, Any] = {"resourceVersion": str(page.resource_version)}
        if page.continue_token is not None:
            metadata["continue"] = page.continue_token
            metadata["remainingItemCount"] = page.remaining
        elif parsed.rtype.from_crd and not wants_table(accept):
            metadata["continue"] = ""  # custom resource lists always carry it
        if wants_table(accept):
            table = render_table(
                parsed.rtype,
                [item.copy(parsed.api_version) for item in items],
                now=self.store.now(),
                include_object=query.get("includeObject", "Metadata"),
                metadata=metadata,
            )
            return _json_response(table)
        if wants_partial_metadata(accept):
            body = {
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": metadata,
                "items": [partial_metadata(item.obj) for item in items],
            }
            return _json_response(body)
        head = encode(
            {
                "kind": parsed.rtype.list_kind,
                "apiVersion": parsed.api_version,
                "metadata": metadata,
            }
        )
        # The list is a join of the objects' cached encodings: no per-list serialization.
        # Lists of built-in kinds carry their items without apiVersion and kind, as
        # kube-apiserver's do; custom resources' items keep them.
        if parsed.rtype.from_crd:
            encoded = [item.encoded(parsed.api_version) for item in items]
        else:
            encoded = [item.encoded_list_item() for item in items]
        data = b"".join((head[:-1], b',"items":[', b",".join(encoded), b"]}"))
        return _json_response(data)

    def _delete_collection(self, parsed: ResourceRequest, query: dict[str, str]) -> web.Response:
        items = self.store.list_objects(parsed.rtype, where=self._filter(parsed, query)).items
        deleted = []
        for item in items:
            with contextlib.suppress(ApiError):
                stored, _ = self.store.delete_object(
                    parsed.rtype, namespace=item.namespace or None, name=item.name
                )
                if parsed.rtype.from_crd:
                    deleted.append(stored.encoded(parsed.api_version))
                else:
                    deleted.append(stored.encoded_list_item())
        head = encode(
            {
                "kind": parsed.rtype.list_kind,
                "apiVersion": parsed.api_version,
                "metadata": {"resourceVersion": str(self.store.resource_version)},
            }
        )
        return _json_response(head[:-1] + b',"items":[' + b",".join(deleted) + b"]}")

    # -- watch -------------------------------------------------------------------------------
