"""What ``id_resolver`` adds: the id of each of its routes, and its refusals, for the service's own calls there.

The filter looks at every method of a route and the service answers them:
the fragment describes the routes as path items with their parameters
(the id as the microversion gate takes it) and the filter's answers as
reusable responses (``#/components/responses/IdResolver400`` ...), which
the service's own operations on those paths reference.
"""

from __future__ import annotations

from typing import Any

from tenancy_mw.openapi._build import Context, error_response, header, version_headers, version_parameters

__all__ = ["RESPONSE_PREFIX", "contribute", "extend", "operations"]

#: The name of its responses in ``components/responses``, followed by the status.
RESPONSE_PREFIX = "IdResolver"
_UUID = "^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"
_REFUSALS = {
    400: "``tenancy.bad-path.*``: a path with no canonical form; ``tenancy.bad-version``: a malformed version; "
    "``tenancy.invalid-id.*``: not an integer id (below the switch) or not a uuid (from it on); "
    "``tenancy.uuid-needs-microversion``: a uuid below the switch; ``tenancy.ambiguous-id``: an integer id in "
    "several cells (id_resolver).",
    404: "``tenancy.not-found``: no cell has the record (or not in the request's tenant's rows) (id_resolver).",
    406: "``tenancy.version-not-acceptable``: a version the service does not serve (id_resolver).",
    503: "``tenancy.cells-unavailable``: a cell the answer depends on did not answer in time (id_resolver).",
}


def operations(middleware: Any, depth: int, context: Context) -> list:
    """``id_resolver`` answers no call of its own."""
    return []


def contribute(middleware: Any, depth: int, context: Context) -> None:
    """It adds nothing to the calls the other filters describe (its routes are the service's)."""


def extend(middleware: Any, depth: int, context: Context) -> None:
    """Its routes as path items, and its answers as ``components/responses``."""
    headers = {**version_headers(middleware), "Vary": header("The version headers: the id depends on them.")}
    for status, description in _REFUSALS.items():
        extra = {"Retry-After": header("Seconds to wait.", {"type": "integer"})} if status == 503 else {}
        context.responses[RESPONSE_PREFIX + str(status)] = error_response(
            status, description, middleware.error_format, {**headers, **extra}
        )
    readings = {"optional": (True, False), "always": (True,), "never": (False,)}[middleware.options.tenant_in_path]
    for resource in middleware.resources:
        for tenant in readings:
            segments = resource.route.strip("/").split("/")
            path = context.tenant_path(*segments) if tenant else context.path(*segments)
            context.path_items[path] = _path_item(middleware, context, path, resource)


def _path_item(middleware: Any, context: Context, path: str, resource: Any) -> dict:
    switch = "%s %s" % (middleware.service_type, middleware.switch)
    words = sorted(resource.except_words)
    forms = [{"pattern": "^[0-9]+$"}, {"pattern": _UUID}] + ([{"enum": words}] if words else [])
    identifier = {
        "name": "id",
        "in": "path",
        "required": True,
        "description": "The %s record's id: a decimal integer below microversion %s, a uuid from it on%s."
        % (
            resource.table,
            switch,
            " (or one of the words the service routes on: %s)" % ", ".join(words) if words else "",
        ),
        "schema": {"type": "string", "anyOf": forms},
    }
    parameters = [p for p in context.path_parameters(path) if p["name"] != "id"] + [identifier]
    references = ", ".join("#/components/responses/%s%d" % (RESPONSE_PREFIX, status) for status in _REFUSALS)
    return {
        "description": "id_resolver finds the cell of the record before the service answers; every method's "
        "answers may be its refusals: %s." % references,
        "parameters": parameters + _version_headers(middleware),
    }


def _version_headers(middleware: Any) -> list[dict]:
    """The version request headers the filter reads for its gate (and, with ``microversions``, its answers)."""
    service_type = middleware.service_type
    found: list[dict[str, Any]] = [
        {
            "name": "OpenStack-API-Version",
            "in": "header",
            "required": False,
            "description": "'%s X.Y' or '%s latest' (at most %s): from %s on, ids are uuids."
            % (service_type, service_type, middleware.maximum, middleware.switch),
            "schema": {"type": "string"},
        }
    ]
    found += [
        {"name": name, "in": "header", "required": False, "description": "X.Y, read when OpenStack-API-Version "
         "names no %s version." % service_type, "schema": {"type": "string"}}
        for name in middleware.legacy_headers
    ]  # fmt: skip
    names = {str(parameter["name"]).lower() for parameter in found}
    return found + [p for p in version_parameters(middleware) if p["name"].lower() not in names]
