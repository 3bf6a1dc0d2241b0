"""oauth provider presets: the endpoints and claims of google, github, gitlab and microsoft.

A preset is only data: where to send the user, where to exchange the code, where to read who
they are, which scopes to ask for by default, and which userinfo claims hold the user and the
email. ``generic`` takes the three endpoints from the ModuleSet instead. The flow itself is the
same for every provider (``identity.py``); the user's identity comes from the userinfo endpoint,
called with the access token the token endpoint returned over TLS.

GitHub is not an OpenID provider: its user is ``login`` and ``email`` is null when the user
keeps it private (such a user cannot pass emailAddresses/emailDomains).
"""

from __future__ import annotations

from dataclasses import dataclass

from interlock.edge.modules.oidc import ProviderEndpoints
from interlock.model.moduleset import GenericOAuthProvider, OAuthProviderSettings

OPENID_SCOPES = ("openid", "email", "profile")


@dataclass(frozen=True, slots=True)
class Preset:
    endpoints: ProviderEndpoints
    scopes: tuple[str, ...]
    user_claim: str = "sub"
    email_claim: str = "email"


PRESETS: dict[str, Preset] = {
    "google": Preset(
        ProviderEndpoints(
            authorize_url="https://accounts.google.com/o/oauth2/v2/auth",
            token_url="https://oauth2.googleapis.com/token",
            userinfo_url="https://openidconnect.googleapis.com/v1/userinfo",
        ),
        OPENID_SCOPES,
    ),
    "github": Preset(
        ProviderEndpoints(
            authorize_url="https://github.com/login/oauth/authorize",
            token_url="https://github.com/login/oauth/access_token",
            userinfo_url="https://api.github.com/user",
            token_auth="post",
        ),
        ("read:user", "user:email"),
        user_claim="login",
    ),
    "gitlab": Preset(
        ProviderEndpoints(
            authorize_url="https://gitlab.com/oauth/authorize",
            token_url="https://gitlab.com/oauth/token",
            userinfo_url="https://gitlab.com/oauth/userinfo",
        ),
        OPENID_SCOPES,
    ),
    "microsoft": Preset(
        ProviderEndpoints(
            authorize_url="https://login.microsoftonline.com/common/oauth2/v2.0/authorize",
            token_url="https://login.microsoftonline.com/common/oauth2/v2.0/token",
            userinfo_url="https://graph.microsoft.com/oidc/userinfo",
        ),
        OPENID_SCOPES,
    ),
}


def preset_for(name: str, settings: OAuthProviderSettings) -> Preset:
    """The preset of ``name``, or for ``generic`` one built from the settings' endpoints."""
    if isinstance(settings, GenericOAuthProvider):
        return Preset(
            ProviderEndpoints(
                authorize_url=settings.authorize_url,
                token_url=settings.token_url,
                userinfo_url=settings.userinfo_url,
            ),
            OPENID_SCOPES,
        )
    return PRESETS[name]
