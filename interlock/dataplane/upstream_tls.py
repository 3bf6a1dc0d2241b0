"""TLS to upstreams, for backends that serve only HTTPS (an Ingress's ``backend-protocol``).

Some backends listen only for TLS (an application server with its own certificate, a gRPC
server with TLS on). ingress-nginx reached them with ``backend-protocol: HTTPS``/``GRPCS`` and,
unless told otherwise (``proxy-ssl-verify``, which interlock does not serve), without verifying
their certificate: inside a cluster such certificates are mostly self-signed. The edge does the
same, so an Ingress that worked behind ingress-nginx works behind interlock — encrypted on the
wire, but not authenticated (``docs/ingress-nginx.md`` says so where it lists the annotation).
"""

from __future__ import annotations

import ssl


def unverified_client_context(*, alpn: tuple[str, ...]) -> ssl.SSLContext:
    """A client context offering ``alpn``, TLS 1.2 or newer, that does not verify the server's
    certificate or name."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(list(alpn))
    return context
