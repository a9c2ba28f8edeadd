"""What ``idempotency`` adds to the calls it guards: the token headers, its refusals, ``Idempotent-Replayed``."""

from __future__ import annotations

from typing import Any

from tenancy_mw.idempotency.tokens import MAX_TOKEN_LENGTH
from tenancy_mw.openapi._build import Context, header, refuse_path, version_headers

__all__ = ["REPLAYED_HEADER", "contribute", "operations", "replayable"]

#: The header of a replayed answer: ``tenancy_mw.idempotency.filter.REPLAYED_HEADER``, whose module imports the
#: WSGI machinery this package does without (tests/unit/openapi checks the two agree).
REPLAYED_HEADER = "Idempotent-Replayed"

_RETRY_AFTER = {"Retry-After": header("Seconds to wait before retrying with the same token.", {"type": "integer"})}


def replayable(status: str) -> bool:
    """Whether an answer of *status* is stored and replayed (not 1xx, 5xx, 408, 425 or 429)."""
    if not status[0].isdigit():
        return status in ("2XX", "3XX", "4XX", "default")
    code = int(status)
    return 200 <= code < 500 and code not in (408, 425, 429)


def operations(middleware: Any, depth: int, context: Context) -> list:
    """``idempotency`` answers no call of its own."""
    return []


def contribute(middleware: Any, depth: int, context: Context) -> None:
    """On every call after it whose method it guards: the token headers, the replay header, its refusals."""
    methods = {method.lower() for method in middleware.methods}
    for operation in context.below(depth):
        if operation.method not in methods:
            continue
        if not _scoped(middleware, operation, context, depth):
            # Every request with a token is refused before its body is read: nothing is stored or replayed.
            _token_parameters(middleware, operation)
            operation.refuse(
                400,
                "idempotency.",
                "a malformed token (invalid-token.*), or any token: the call has no tenant to scope it to (no-tenant).",
                middleware.error_format,
                version_headers(middleware),
            )
            continue
        replayed = header(
            "true: this answer is the stored answer to the first request with this token.", {"const": "true"}
        )
        # Every answer stored so far (the call's own and the filters' after this one) can come back replayed.
        for status, draft in operation.responses.items():
            if replayable(status):
                draft.headers[REPLAYED_HEADER] = replayed
        _token_parameters(middleware, operation)
        _refusals(middleware, operation)


def _scoped(middleware: Any, operation: Any, context: Context, depth: int) -> bool:
    """Whether a token on *operation* can have a scope: ``shared_scope``, a confirmed token's project, a tenant."""
    options = middleware.options
    if options.shared_scope or options.keystone_scope:
        return True
    # The tenant tenant_path found before this filter: of the path, or of a confirmed token (token_tenant).
    return context.tenant_path_before(depth) and (operation.under_tenant or context.token_tenant)


def _token_parameters(middleware: Any, operation) -> None:
    names = [name for _, name in middleware.token_headers]
    for name in names:
        operation.parameter(
            {
                "name": name,
                "in": "header",
                "required": False,
                "description": "A client token: a retry with the same token and the same request gets the first "
                "answer again (%s; when several are sent they must agree). A bare token or a quoted structured-field "
                "string." % ", ".join(names),
                "schema": {"type": "string", "minLength": 1, "maxLength": MAX_TOKEN_LENGTH + 2},
            }
        )


def _refusals(middleware: Any, operation) -> None:
    options, fmt, headers = middleware.options, middleware.error_format, version_headers(middleware)
    refuse_path(operation, middleware, "idempotency", False)
    operation.refuse(
        400,
        "idempotency.",
        "a malformed token (invalid-token.*), tokens that disagree "
        "(conflicting-tokens), a body that cannot be read%s."
        % ("" if options.shared_scope else ", no tenant to scope the token to (no-tenant)"),
        fmt,
        headers,
    )
    operation.refuse(
        options.mismatch_status,
        "idempotency.token-reused",
        "the token was used with a different request.",
        fmt,
        headers,
    )
    operation.refuse(
        409,
        "idempotency.in-flight",
        "the first request with this token is still running (with in_flight = wait: after in_flight_timeout).",
        fmt,
        {**headers, **_RETRY_AFTER},
    )
    operation.refuse(411, "idempotency.length-required", "a chunked body without Content-Length.", fmt, headers)
    operation.refuse(413, "idempotency.body-too-large", "a body over max_body_bytes.", fmt, headers)
    if options.on_store_error == "fail_closed":
        operation.refuse(
            503,
            "idempotency.store-unavailable",
            "the token store cannot be reached; retry with the same token.",
            fmt,
            {**headers, **_RETRY_AFTER},
        )
