"""The identity headers oauth and oidc send upstream, and their removal from every request.

A backend behind the edge reads ``X-Forwarded-User`` and ``X-Forwarded-Email`` as who signed in.
Every edge route removes client-sent copies of both, with an identity module or without: a
backend served by a host with oidc and by another host (or route) without any must not believe
a forged user from the second. They live apart from ``identity.py`` so that this does not load
PyJWT and ``cryptography``, which only a route with oauth or oidc uses.
"""

from __future__ import annotations

from collections.abc import MutableMapping

from multidict import istr

FORWARDED_USER = "X-Forwarded-User"
"""The signed-in user (the ``sub`` claim, or the provider preset's user claim)."""
FORWARDED_EMAIL = "X-Forwarded-Email"
"""The signed-in user's email, when the provider gave one."""
IDENTITY_HEADERS = (FORWARDED_USER, FORWARDED_EMAIL)

_IDENTITY_NAMES = tuple(istr(name) for name in IDENTITY_HEADERS)
"""The same, as ``istr``: a case-insensitive lookup without folding the name each time."""


def strip_identity_headers(headers: MutableMapping[str, str]) -> None:
    """Remove every :data:`IDENTITY_HEADERS` (all copies, any case)."""
    for name in _IDENTITY_NAMES:
        while name in headers:
            del headers[name]
