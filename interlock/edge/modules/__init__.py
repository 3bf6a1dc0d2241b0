"""Edge modules: what a route runs before (and around) its backend.

The data plane calls :func:`compile_modules` when a route's modules are applied — every error is
raised there, permanent (:class:`ModuleConfigError`) or transient (:class:`MissingSecretError`)
— and then, per request, the :class:`ModuleChain` it returned: ``check_request`` before proxying,
``upstream_request_headers`` on the way out, ``record_upstream`` and ``response_headers`` on the
way back, ``should_compress`` for the body. One small module per module type; this package only
re-exports the public surface.
"""

from interlock.edge.modules.chain import ORDER, ModuleChain, compile_modules
from interlock.edge.modules.compression import should_compress
from interlock.edge.modules.errors import MissingSecretError, ModuleConfigError
from interlock.edge.modules.identity import Admitted, IdentityReply
from interlock.edge.modules.oidc import ProviderUnavailableError
from interlock.edge.modules.view import Rejection, RequestView

__all__ = [
    "ORDER",
    "Admitted",
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
