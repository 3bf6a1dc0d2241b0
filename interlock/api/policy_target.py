"""Which Service port and client namespace a policy API request names, checked.

Both ways of serving a request (aiohttp's handler in ``policy.py`` and the lean watch streams of
``policy_stream.py``) read the same four strings off the path and query; one function checks
them, so both accept and refuse exactly the same names.
"""

from __future__ import annotations

import re

from interlock.model.policy_watch import WatchTarget
from interlock.model.service import ServicePortKey

# RFC 1123 labels, as Kubernetes requires for namespace and Service names.
# Used with fullmatch: "$" alone also matches before a final newline ("default\n").
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


class BadRequest(ValueError):
    """A request the API cannot answer; the message says which part is wrong."""


def watch_target(
    *, namespace: str, service: str, port_text: str, client_namespace: str | None
) -> WatchTarget:
    """The :class:`WatchTarget` the (decoded) path parts and query name, or
    :class:`BadRequest` naming the wrong part; no ``clientNamespace`` means the Service's."""
    client_namespace = client_namespace or namespace
    for what, value in (
        ("namespace", namespace),
        ("service", service),
        ("clientNamespace", client_namespace),
    ):
        if not _DNS_LABEL.fullmatch(value):
            raise BadRequest(f"{what} {value!r} is not a valid Kubernetes name (RFC 1123 label)")
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise BadRequest(f"port {port_text!r} must be a number in 1..65535")
    return WatchTarget(
        ServicePortKey(namespace, service, int(port_text)), client_namespace=client_namespace
    )
