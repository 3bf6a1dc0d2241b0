"""Header names the data plane looks up on every request, as ``multidict.istr``.

A case-insensitive multidict folds the case of a plain ``str`` name on every lookup, ``in``,
``popall`` and assignment; an ``istr`` carries its folded form, so the lookup skips that work
(``popall`` of an ``istr`` costs under half of a ``str``'s). The hot paths of both front doors
(hop-by-hop removal, ``X-Forwarded-*``, the upstream request head) make a dozen such lookups
per request; the names here are the same text, written as they go on the wire.
"""

from __future__ import annotations

from typing import Final

from multidict import istr

CONNECTION: Final = istr("Connection")
CONTENT_TYPE_LOWER: Final = istr("content-type")
"""Lower case: also found in a plain ``dict`` of HTTP/2's lower-case names."""
CONTENT_LENGTH: Final = istr("Content-Length")
EXPECT: Final = istr("Expect")
GRPC_STATUS: Final = istr("grpc-status")
HOST: Final = istr("Host")
TRANSFER_ENCODING: Final = istr("Transfer-Encoding")
X_FORWARDED_FOR: Final = istr("X-Forwarded-For")
X_FORWARDED_HOST: Final = istr("X-Forwarded-Host")
X_FORWARDED_PROTO: Final = istr("X-Forwarded-Proto")
