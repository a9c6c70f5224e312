"""Authentication (bearer tokens) and the authorization hook.

``Authenticator`` maps a bearer token to a :class:`~.rbac.UserInfo`:

- static tokens (``tokens``: user -> token). ``admin`` is in ``system:masters`` (allowed
  everything); other static users get only the groups given to :meth:`Authenticator.add_user`
  plus ``system:authenticated``.
- ServiceAccount tokens, issued by the TokenRequest API (``POST .../serviceaccounts/<n>/token``)
  or :meth:`Authenticator.issue_service_account_token`: JWT-shaped, bound to the
  ServiceAccount's uid (deleting the ServiceAccount revokes them) and expiring at
  ``expirationTimestamp`` (wall clock), as real bound tokens do.

``Authorizer`` is the legacy hook signature ``authorizer(user, verb, resource, namespace,
name) -> bool`` (``resource`` is the plural or ``plural/subresource``); the server's default is
RBAC (:mod:`.rbac`).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json
import secrets
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from ..clock import Clock
from .rbac import AUTHENTICATED, SUPERUSER_GROUP, UserInfo, service_account_user

ADMIN = "admin"


@dataclass(frozen=True)
class Attributes:
    """What a request does, as an authorizer sees it (apiserver RequestInfo)."""

    user: str
    verb: str
    group: str
    resource: str  # plural, or plural/subresource
    namespace: str | None
    name: str | None
    path: str


Authorizer = Callable[[str, str, str, "str | None", "str | None"], bool]


def allow_all(user: str, verb: str, resource: str, namespace: str | None,
              name: str | None) -> bool:
    return True


@dataclass(frozen=True)
class BoundToken:
    namespace: str
    name: str
    uid: str
    expires: dt.datetime
    token_id: str


# (namespace, name) -> uid of the live ServiceAccount, or None
ServiceAccountLookup = Callable[[str, str], "str | None"]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Authenticator:
    def __init__(self, tokens: dict[str, str] | None = None,
                 sa_lookup: ServiceAccountLookup | None = None) -> None:
        """``tokens`` maps user -> token; one random token for ``admin`` when omitted."""
        self.tokens: dict[str, str] = dict(tokens) if tokens else {
            ADMIN: secrets.token_urlsafe(32)}
        self.groups: dict[str, tuple[str, ...]] = {ADMIN: (SUPERUSER_GROUP,)}
        self.sa_lookup = sa_lookup
        self._bound: dict[str, BoundToken] = {}
        self._lock = threading.Lock()
        self._key = secrets.token_bytes(32)
        self._cache: dict[str, str] = {}
        self._cache_key: tuple[tuple[str, str], ...] = ()

    # ------------------------------------------------------------------ static users
    def add_user(self, user: str, token: str | None = None,
                 groups: tuple[str, ...] | list[str] = ()) -> str:
        tok = token or secrets.token_urlsafe(32)
        self.tokens[user] = tok
        if groups:
            self.groups[user] = tuple(groups)
        return tok

    def token_for(self, user: str) -> str:
        return self.tokens[user]

    # ------------------------------------------------------------------ ServiceAccounts
    def issue_service_account_token(self, namespace: str, name: str, uid: str,
                                    expiration_seconds: int = 3600,
                                    audiences: tuple[str, ...] = ()
                                    ) -> tuple[str, dt.datetime]:
        """A token for ServiceAccount ``namespace/name`` (uid ``uid``) and its expiry."""
        now = Clock.wall_now().replace(microsecond=0)
        exp = now + dt.timedelta(seconds=expiration_seconds)
        jti = str(uuid.uuid4())
        header = _b64(json.dumps({"alg": "HS256", "kid": "harvester-sim"}).encode())
        claims = {"aud": list(audiences), "exp": int(exp.timestamp()),
                  "iat": int(now.timestamp()), "iss": "https://kubernetes.default.svc",
                  "jti": jti, "sub": f"system:serviceaccount:{namespace}:{name}",
                  "kubernetes.io": {"namespace": namespace,
                                    "serviceaccount": {"name": name, "uid": uid}}}
        payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
        sig = _b64(hmac.new(self._key, f"{header}.{payload}".encode(), hashlib.sha256).digest())
        token = f"{header}.{payload}.{sig}"
        with self._lock:
            self._bound[token] = BoundToken(namespace, name, uid, exp, jti)
        return token, exp

    def expire(self, token: str) -> None:
        """Make a ServiceAccount token expired now (tests)."""
        with self._lock:
            b = self._bound.get(token)
            if b is not None:
                self._bound[token] = BoundToken(b.namespace, b.name, b.uid,
                                                Clock.wall_now(), b.token_id)

    # ------------------------------------------------------------------ authentication
    def authenticate(self, header: str | None) -> str | None:
        """The user name for an ``Authorization`` header value, or None."""
        info = self.authenticate_user(header)
        return info.name if info is not None else None

    def authenticate_user(self, header: str | None) -> UserInfo | None:
        """The user (name, groups) for an ``Authorization`` header value, or None."""
        if not header:
            return None
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "bearer" or not value:
            return None
        value = value.strip()
        user = self._by_token().get(value)
        if user is not None and hmac.compare_digest(self.tokens[user], value):
            return UserInfo(user, (*self.groups.get(user, ()), AUTHENTICATED))
        bound = self._bound.get(value)
        if bound is None:
            return None
        if Clock.wall_now() >= bound.expires:
            return None
        if self.sa_lookup is not None and self.sa_lookup(bound.namespace,
                                                         bound.name) != bound.uid:
            return None  # the ServiceAccount was deleted (or re-created): token revoked
        info = service_account_user(bound.namespace, bound.name, bound.uid)
        return UserInfo(info.name, info.groups, info.uid,
                        {"authentication.kubernetes.io/credential-id": [
                            f"JTI={bound.token_id}"]})

    def _by_token(self) -> dict[str, str]:
        snap = tuple(self.tokens.items())
        if self._cache_key != snap:
            self._cache = {tok: user for user, tok in snap}
            self._cache_key = snap
        return self._cache
