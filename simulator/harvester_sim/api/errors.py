"""Kubernetes ``Status`` errors, built in one place (apimachinery pkg/api/errors semantics)."""

from __future__ import annotations

from typing import Any

_HTTP_REASON_PHRASE = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    406: "Not Acceptable",
    409: "Conflict",
    410: "Gone",
    415: "Unsupported Media Type",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


def reason_phrase(code: int) -> str:
    return _HTTP_REASON_PHRASE.get(code, "Error")


class ApiError(Exception):
    """An API failure carrying the ``Status`` object the server answers with."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code  # after details, as the real apiserver writes it
        return body


def qualified(resource: str, group: str) -> str:
    """``deployments.apps`` / ``pods`` as used in error messages."""
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{qualified(resource, group)} "{name}" not found',
        {"name": name, "group": group, "kind": resource} if group else
        {"name": name, "kind": resource},
    )


def already_exists(resource: str, group: str, name: str) -> ApiError:
    det: dict[str, Any] = {"name": name, "kind": resource}
    if group:
        det["group"] = group
    return ApiError(409, "AlreadyExists",
                    f'{qualified(resource, group)} "{name}" already exists', det)


def conflict(resource: str, group: str, name: str, why: str | None = None) -> ApiError:
    det: dict[str, Any] = {"name": name, "kind": resource}
    if group:
        det["group"] = group
    msg = why or (
        "the object has been modified; please apply your changes to the latest version "
        "and try again"
    )
    return ApiError(
        409, "Conflict",
        f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {msg}', det
    )


def invalid(kind: str, group: str, name: str, causes: list[dict[str, str]]) -> ApiError:
    """422 Invalid; causes are ``{"reason","message","field"}`` dicts."""
    parts = []
    for c in causes:
        field = c.get("field", "")
        parts.append(f"{field}: {c['message']}" if field else c["message"])
    det: dict[str, Any] = {"name": name, "kind": kind, "causes": causes}
    if group:
        det["group"] = group
    label = f"{kind}.{group}" if group else kind
    # errs.ToAggregate(): one error as is, several (duplicates dropped) in brackets
    uniq = list(dict.fromkeys(parts))
    text = uniq[0] if len(uniq) == 1 else f"[{', '.join(uniq)}]"
    return ApiError(422, "Invalid", f'{label} "{name}" is invalid: {text}' if parts else
                    f'{label} "{name}" is invalid', det)


def field_invalid(field: str, value: Any, detail: str) -> dict[str, str]:
    import json

    return {
        "reason": "FieldValueInvalid",
        "message": f"Invalid value: {json.dumps(value)}: {detail}",
        "field": field,
    }


def field_required(field: str, detail: str = "Required value") -> dict[str, str]:
    return {"reason": "FieldValueRequired", "message": detail, "field": field}


def field_forbidden(field: str, detail: str) -> dict[str, str]:
    return {"reason": "FieldValueForbidden", "message": f"Forbidden: {detail}", "field": field}


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def method_not_allowed(verb: str, resource: str) -> ApiError:
    return ApiError(
        405, "MethodNotAllowed", f'{verb} is not supported on resources of kind "{resource}"'
    )


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def forbidden(user: str, verb: str, resource: str, group: str, namespace: str | None,
              name: str | None = None, reason: str = "") -> ApiError:
    """403 from the authorizer (apiserver responsewriters.ForbiddenStatusError).

    ``resource`` may be ``plural/subresource``: the message names it whole, the qualified
    resource and ``details.kind`` only the plural (``pods "x" is forbidden: ... "pods/log"``).
    """
    plural = resource.split("/", 1)[0]
    res = qualified(plural, group)
    where = (
        f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    )
    named = f' "{name}"' if name else ""
    det: dict[str, Any] = {}
    if name:
        det["name"] = name
    if group:
        det["group"] = group
    det["kind"] = plural
    why = f": {reason}" if reason else ""
    return ApiError(
        403,
        "Forbidden",
        f'{res}{named} is forbidden: User "{user}" cannot {verb} resource "{resource}" '
        f'in API group "{group}" {where}{why}',
        det,
    )


def forbidden_path(user: str, verb: str, path: str, reason: str = "") -> ApiError:
    """403 for a non-resource URL (``forbidden: User "u" cannot get path "/x"``)."""
    why = f": {reason}" if reason else ""
    return ApiError(403, "Forbidden", f'forbidden: User "{user}" cannot {verb} path "{path}"{why}',
                    {})


def forbidden_terminating(resource: str, group: str, namespace: str) -> ApiError:
    """Create in a namespace that is being deleted (NamespaceLifecycle admission)."""
    det: dict[str, Any] = {"name": namespace, "kind": "namespaces", "causes": [{
        "reason": "NamespaceTerminating",
        "message": f'namespace {namespace} is being terminated',
        "field": "metadata.namespace"}]}
    return ApiError(
        403, "Forbidden",
        f'{qualified(resource, group)} is forbidden: unable to create new content in '
        f'namespace {namespace} because it is being terminated', det)


def too_many_requests(message: str, retry_after: int | None = None) -> ApiError:
    det: dict[str, Any] | None = None
    headers: dict[str, str] = {}
    if retry_after:
        det = {"retryAfterSeconds": retry_after}
        headers["Retry-After"] = str(retry_after)
    return ApiError(429, "TooManyRequests", message, det, headers)


def internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}")


def unsupported_media_type(message: str) -> ApiError:
    return ApiError(415, "UnsupportedMediaType", message)


def not_acceptable(accepted: list[str]) -> ApiError:
    """406, as the apiserver's content negotiation answers an Accept it cannot meet."""
    return ApiError(406, "NotAcceptable",
                    f"only the following media types are accepted: {', '.join(accepted)}")


def not_found_path() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})
