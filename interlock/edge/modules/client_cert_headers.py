"""The identity headers mutualTLS sends upstream, and their removal from every request.

Every route strips client-sent copies of these headers, with mutualTLS or without (a backend
behind a route with mutualTLS and one without must not believe a forged subject from the
second), so the chain needs them on every request. They live apart from ``mutual_tls.py`` so
that this does not load ``cryptography`` (~8 MiB), which only a route with mutualTLS uses.
"""

from __future__ import annotations

from collections.abc import MutableMapping

from multidict import istr

SUBJECT_HEADER = "X-Client-Cert-Subject"
"""The verified certificate's subject, as an RFC 4514 string (``CN=alice,O=Example``)."""
SAN_HEADER = "X-Client-Cert-SAN"
"""Its subject alternative names, ``DNS:a.example, email:a@example.com, URI:…, IP:…``."""
FINGERPRINT_HEADER = "X-Client-Cert-Fingerprint"
"""The SHA-256 of its DER bytes, lower-case hex (to pin one certificate)."""
CLIENT_CERT_HEADERS = (SUBJECT_HEADER, SAN_HEADER, FINGERPRINT_HEADER)

_CLIENT_CERT_NAMES = tuple(istr(name) for name in CLIENT_CERT_HEADERS)
"""The same, as ``istr``: a case-insensitive lookup without folding the name each time (every
request to a route without mutualTLS strips them)."""


def strip_client_cert_headers(headers: MutableMapping[str, str]) -> None:
    """Remove every :data:`CLIENT_CERT_HEADERS` (all copies, any case)."""
    for name in _CLIENT_CERT_NAMES:
        while name in headers:
            del headers[name]
