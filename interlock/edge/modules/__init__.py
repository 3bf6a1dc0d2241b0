"""Edge modules: what a route runs before (and around) its backend.

The data plane calls :func:`compile_modules` when a route's modules are applied — every error is
raised there, permanent (:class:`ModuleConfigError`) or transient (:class:`MissingSecretError`)
— and then, per request, the :class:`ModuleChain` it returned: ``check_request`` before proxying,
``upstream_request_headers`` on the way out, ``record_upstream`` and ``response_headers`` on the
way back, ``should_compress`` for the body. One small module per module type; this package only
re-exports the public surface, and imports none of the modules that need ``cryptography``, PyJWT
or an identity provider (mutualTLS, jwt, oauth, oidc): :func:`compile_modules` imports each one
when a ModuleSet configures it, so an edge without them does not carry them (~9 MiB of RSS).
"""

from interlock.edge.modules.chain import ORDER, ModuleChain, compile_modules
from interlock.edge.modules.compression import should_compress
from interlock.edge.modules.errors import (
    MissingSecretError,
    ModuleConfigError,
    ProviderUnavailableError,
)
from interlock.edge.modules.view import IdentityReply, Rejection, RequestView

__all__ = [
    "ORDER",
    "IdentityReply",
    "MissingSecretError",
    "ModuleChain",
    "ModuleConfigError",
    "ProviderUnavailableError",
    "Rejection",
    "RequestView",
    "compile_modules",
    "should_compress",
]
