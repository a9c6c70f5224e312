"""What the operator reads about the connection to the API server: one line for a failure
to connect (:func:`connection_failure`) instead of urllib3's retry chain, and the warning
when TLS verification is turned off (:func:`warn_insecure`)."""

from __future__ import annotations

import os
from typing import Any

INSECURE_WARNING = ("TLS certificate verification is OFF (validate_certs=false or "
                    "K8S_AUTH_VERIFY_SSL=no): the API server's identity is not checked and the "
                    "bearer token can be sent to an impostor. Give the cluster's CA "
                    "(ca_cert / kubeconfig certificate-authority-data) instead.")


def verification_disabled(auth: dict[str, Any]) -> bool:
    """Did the user turn TLS verification off (option, or kubernetes.core's env variable)?"""
    value = auth.get("validate_certs")
    if value is None:
        value = os.environ.get("K8S_AUTH_VERIFY_SSL", os.environ.get("K8S_AUTH_VALIDATE_CERTS"))
    if value is None:
        return False
    return str(value).strip().lower() in ("false", "no", "0", "off", "n", "f")


def _config_source(auth: dict[str, Any]) -> str:
    if auth.get("host"):
        return "host option / K8S_AUTH_HOST"
    path = auth.get("kubeconfig") or os.environ.get("K8S_AUTH_KUBECONFIG") or \
        os.environ.get("KUBECONFIG") or "~/.kube/config"
    ctx = auth.get("context") or os.environ.get("K8S_AUTH_CONTEXT")
    return f"kubeconfig {path}" + (f", context {ctx}" if ctx else "")


def connection_failure(exc: BaseException, auth: dict[str, Any]) -> str:
    """One line saying which API server could not be reached, from which configuration, and
    why (instead of urllib3's retry chain)."""
    source = _config_source(auth)
    from urllib3.exceptions import MaxRetryError, NewConnectionError, SSLError
    if isinstance(exc, MaxRetryError):
        pool = getattr(exc, "pool", None)
        where = (f"{getattr(pool, 'scheme', 'https')}://{getattr(pool, 'host', '?')}:"
                 f"{getattr(pool, 'port', '?')}") if pool is not None else "the API server"
        reason = exc.reason
        if isinstance(reason, SSLError):
            why = f"TLS failed ({str(reason).splitlines()[0][:200]}); check the CA " \
                  "(certificate-authority-data / ca_cert) or validate_certs"
        elif isinstance(reason, NewConnectionError):
            text = str(reason)
            why = ("connection refused" if "refused" in text.lower() else
                   "the host name does not resolve" if "resolution" in text.lower()
                   or "name or service" in text.lower() else
                   "connection timed out" if "timed out" in text.lower() else
                   text.rsplit(": ", 1)[-1][:200])
        else:
            why = str(reason).splitlines()[0][:200] if reason else "no answer"
        return f"cannot reach the Kubernetes API at {where} ({source}): {why}"
    status = getattr(exc, "status", None)
    if isinstance(status, int) and status in (401, 403):
        return (f"the Kubernetes API refused the credentials of {source}: {status} "
                f"{getattr(exc, 'reason', '')}".rstrip())
    text = " ".join(str(exc).split())[:300]
    return f"cannot connect to the Kubernetes API ({source}): {type(exc).__name__}: {text}"


def warn_insecure(module: Any, auth: dict[str, Any]) -> None:
    """Verification is on by default; turning it off is explicit and always warned about."""
    if verification_disabled(auth) and hasattr(module, "warn"):
        module.warn(INSECURE_WARNING)
