"""Raw JSON requests through kubernetes-asyncio's ``ApiClient``, and the error they raise.

The typed APIs of kubernetes-asyncio convert every response into generated model objects, which
is slow for large lists and useless to us (``model/`` parses raw dicts), and they raise on some
harmless inputs (a BOOKMARK without a resourceVersion). Going through ``ApiClient.call_api`` with
``_preload_content=False`` keeps authentication, TLS and token refresh from the client while we
read the bytes ourselves. Every failure becomes one :class:`KubeApiError` that says which request
failed and whether trying again can help, so callers classify errors in one place.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, cast

import aiohttp

from interlock.kube.library import ApiClient

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"

_RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})


class KubeApiError(Exception):
    """A request to the API server failed: the request, the HTTP code (0 if none) and why."""

    def __init__(
        self,
        *,
        what: str,
        code: int,
        reason: str,
        message: str,
        retry_after: float | None = None,
    ) -> None:
        self.what = what
        self.code = code
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        """Seconds the server asked us to wait (``Retry-After`` on 429/503), if it said."""
        detail = f"{code} {reason}".strip() if code else reason
        super().__init__(f"{what}: {detail}: {message}" if message else f"{what}: {detail}")

    @property
    def retryable(self) -> bool:
        """True for errors that go away by themselves: no connection, 5xx, 429, timeouts."""
        return self.code == 0 or self.code in _RETRYABLE_STATUS

    @property
    def expired(self) -> bool:
        """True when a resourceVersion or continue token is too old (410 Gone / Expired)."""
        return self.code == 410


def status_error(
    *, what: str, code: int, body: object, headers: Mapping[str, str] | None = None
) -> KubeApiError:
    """The error for a non-2xx response whose body may be a ``Status`` object."""
    reason = ""
    message = ""
    if isinstance(body, Mapping):
        reason = str(body.get("reason") or "")
        message = str(body.get("message") or "")
    return KubeApiError(
        what=what, code=code, reason=reason, message=message, retry_after=_retry_after(headers)
    )


def _retry_after(headers: Mapping[str, str] | None) -> float | None:
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: rare from API servers, and the backoff still applies


def connection_error(*, what: str, error: BaseException) -> KubeApiError:
    """The error for a request that never got an HTTP answer (refused, reset, timed out),
    worded for a person: ``no connection: cannot connect to 10.0.0.1:6443 (connection
    refused)``, not the client library's repr of the socket error."""
    import aiohttp

    if isinstance(error, aiohttp.ClientConnectorError):
        os_error = error.os_error
        # asyncio's strerror is "Connect call failed ('10.0.0.1', 6443)"; errno's words are not.
        cause = os.strerror(os_error.errno) if os_error.errno else type(os_error).__name__
        message = f"cannot connect to {error.host}:{error.port} ({cause.lower()})"
        return KubeApiError(what=what, code=0, reason="no connection", message=message)
    if isinstance(error, TimeoutError):
        return KubeApiError(what=what, code=0, reason="timed out", message=str(error))
    return KubeApiError(what=what, code=0, reason=type(error).__name__, message=str(error))


QueryParams = Sequence[tuple[str, str]]


async def open_request(
    api: ApiClient,
    *,
    method: str,
    path: str,
    what: str,
    query: QueryParams = (),
    body: object = None,
    content_type: str = JSON,
    request_timeout: aiohttp.ClientTimeout | None = None,
) -> aiohttp.ClientResponse:
    """Send a request and return the open response, whatever its status; the caller releases it.

    Raises :class:`KubeApiError` (code 0) when there is no HTTP answer.
    """
    try:
        response = await api.call_api(
            path,
            method,
            query_params=list(query),
            header_params={"Accept": JSON, "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=request_timeout,
        )
    except (TimeoutError, aiohttp.ClientError, OSError) as error:
        raise connection_error(what=what, error=error) from error
    return cast(aiohttp.ClientResponse, response)


async def request_json(
    api: ApiClient,
    *,
    method: str,
    path: str,
    what: str,
    query: QueryParams = (),
    body: object = None,
    content_type: str = JSON,
    request_timeout: float = 30.0,
) -> dict[str, Any]:
    """Send a request and return its JSON body; any non-2xx answer raises :class:`KubeApiError`.

    ``what`` names the request in errors (``"patch status of HTTPRoute default/web"``).
    """
    response = await open_request(
        api,
        method=method,
        path=path,
        what=what,
        query=query,
        body=body,
        content_type=content_type,
        request_timeout=aiohttp.ClientTimeout(total=request_timeout),
    )
    async with response:
        try:
            raw = await response.read()
        except (TimeoutError, aiohttp.ClientError, OSError) as error:
            raise connection_error(what=what, error=error) from error
    try:
        data: object = json.loads(raw) if raw else {}
    except ValueError:
        data = {"message": raw[:200].decode("utf-8", "replace")}
    if not 200 <= response.status <= 299:
        raise status_error(what=what, code=response.status, body=data, headers=response.headers)
    if not isinstance(data, dict):
        raise KubeApiError(what=what, code=response.status, reason="BadResponse", message="")
    return data
