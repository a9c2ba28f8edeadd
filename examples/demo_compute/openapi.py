"""The demo's OpenAPI 3.1 document, served at ``GET /openapi.json`` on each endpoint.

:func:`demo_document` describes what :class:`demo_compute.app.DemoCompute`
answers (its routes in :mod:`demo_compute.app` and
:data:`demo_compute.cells_api.CellsApi.ROUTES`), with every status the
filters in front of it give those URLs (``400`` for a bad path or version,
``404``/``410`` under an unknown/deleted tenant, ``301`` at a moved
server's old URL, ``406`` out of the version range, ``503`` when a cell did
not answer); :func:`endpoint_document` merges it with
:func:`tenancy_mw.openapi.describe_pipeline` of the endpoint's own chain (the
tenant admin API, the tag API and parameters, idempotency headers) and
leaves out every operation an ``admin_cull`` of that chain refuses, so
the public endpoint's document has no admin call.

The :class:`OpenApiFilter` paste filter builds its endpoint's document once,
when the pipeline loads, from the chain below it, and answers
``GET /openapi.json`` (and ``HEAD``) with it; every other request passes::

    [pipeline:main]
    pipeline = request_id openapi admin_cull tenant_path ... demo_compute

    [filter:openapi]
    paste.filter_factory = demo_compute.openapi:filter_factory

Operations are ``GET``, ``PUT``, ``POST`` and ``DELETE``; every ``GET``
route also takes ``HEAD`` (the same answer without a body), left out of the
document.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable

from demo_compute import API_VERSION, microversions
from tenancy_mw import openapi
from tenancy_mw.core.paging import MAX_LIMIT_VALUE, MAX_MARKER_LENGTH

__all__ = [
    "DOCUMENT_PATH",
    "OpenApiFilter",
    "complete_document",
    "demo_document",
    "documents",
    "endpoint_document",
    "filter_factory",
]

#: Where each endpoint serves its document.
DOCUMENT_PATH = "/openapi.json"

_V = "/" + API_VERSION
_TENANT = _V + "/{tenant_id}"
_JSON = "application/json"
_ERROR = {"$ref": "#/components/schemas/Error"}
_METHODS = ("get", "put", "post", "delete", "head", "patch", "options")
# oslo.middleware's request ids.
_REQUEST_ID_PATTERN = "^req-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"


def _ref(kind: str, name: str) -> dict:
    return {"$ref": "#/components/%s/%s" % (kind, name)}


def _json(schema: dict, description: str, headers: dict | None = None, links: dict | None = None) -> dict:
    response: dict = {"description": description, "content": {_JSON: {"schema": schema}}}
    if headers:
        response["headers"] = headers
    if links:
        response["links"] = links
    return response


# The answers of the filters and the app, by status (statuses the demo's URLs may give; an
# operation lists those it can).
_ERRORS = {
    "301": ("MovedPermanently", "The server moved to another tenant; Location is its new URL (tenant_admin)."),
    "400": ("BadRequest", "A malformed path, tenant id, microversion, query or body."),
    "404": ("NotFound", "Nothing there: an unknown tenant, server, tag, id, or a URL the version does not serve."),
    "405": ("MethodNotAllowed", "A method the URL does not take (with Allow)."),
    "406": ("NotAcceptable", "A microversion outside 2.1 to 2.53."),
    "409": ("Conflict", "An idempotency token reused with another request, or still running."),
    "410": ("Gone", "The tenant is deleted."),
    "411": ("LengthRequired", "A body without Content-Length."),
    "413": ("RequestTooLarge", "A body over the limit."),
    "414": ("UriTooLong", "A request line over gunicorn's limit (4094 bytes): gunicorn's own HTML page."),
    "503": ("ServiceUnavailable", "A cell database did not answer in time (Retry-After)."),
}

# Every URL under /v2.1: a bad path or version (400), a version out of range (406).
_UNDER_VERSION = ("400", "406")
# Under a tenant: unknown (404), deleted (410).
_UNDER_TENANT = _UNDER_VERSION + ("404", "410")
# Routes with a body.
_WITH_BODY = ("411", "413")


def _errors(*statuses: str) -> dict:
    return {status: _ref("responses", _ERRORS[status][0]) for status in statuses}


def _operation(operation_id: str, summary: str, responses: dict, *errors: str, **extra) -> dict:
    # Any URL can be too long for the server (gunicorn answers before any filter).
    errors += ("414",)
    operation = {"operationId": operation_id, "summary": summary, "responses": dict(responses, **_errors(*errors))}
    operation.update(extra)
    return operation


def _schemas(error_format: str) -> dict:
    string = {"type": "string"}
    nullable_string = {"type": ["string", "null"]}
    # Integers below microversion 2.53, uuids from it.
    cell_id = {"oneOf": [{"type": "integer"}, {"type": "string", "format": "uuid"}]}
    links = {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["rel", "href"],
            "properties": {"rel": string, "href": string},
        },
    }
    version = {
        "type": "object",
        "required": ["id", "status", "version", "min_version", "updated", "links"],
        "properties": {
            "id": {"const": API_VERSION},
            "status": {"const": "CURRENT"},
            "version": {"const": str(microversions.MAX_VERSION)},
            "min_version": {"const": str(microversions.MIN_VERSION)},
            "updated": string,
            "links": links,
            "media-types": {"type": "array", "items": {"type": "object"}},
        },
    }
    server = {
        "type": "object",
        "required": ["id", "name", "tenant_id", "created", "links", "status", "flavor", "image", "addresses"],
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "name": string,
            "tenant_id": string,
            "created": {"type": "string", "format": "date-time"},
            "links": links,
            "status": {"const": "ACTIVE"},
            "flavor": {"type": "object"},
            "image": string,
            "addresses": {"type": "object"},
            "tags": {"$ref": "#/components/schemas/TagList"},
        },
        "additionalProperties": False,
    }
    service = {
        "type": "object",
        "required": ["id", "binary", "host", "zone", "status", "state", "updated_at", "disabled_reason", "forced_down"],
        "properties": {
            "id": cell_id,
            "binary": string,
            "host": string,
            "zone": string,
            "status": {"enum": ["enabled", "disabled"]},
            "state": {"enum": ["up", "down"]},
            "updated_at": nullable_string,
            "disabled_reason": nullable_string,
            "forced_down": {"type": "boolean"},
        },
    }
    hypervisor = {
        "type": "object",
        "required": ["id", "hypervisor_hostname", "state", "status"],
        "properties": {
            "id": cell_id,
            "hypervisor_hostname": string,
            "state": {"enum": ["up", "down"]},
            "status": {"enum": ["enabled", "disabled"]},
            "hypervisor_type": string,
            "host_ip": string,
            "uptime": string,
            "service": {
                "type": "object",
                "required": ["id", "host", "disabled_reason"],
                "properties": {
                    "id": {"oneOf": [cell_id, {"type": "null"}]},
                    "host": string,
                    "disabled_reason": nullable_string,
                },
            },
        },
    }
    if error_format == "nova":
        # nova's fault: {"itemNotFound": {"code": 404, "message": "..."}}.
        error = {
            "type": "object",
            "minProperties": 1,
            "maxProperties": 1,
            "additionalProperties": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {"code": {"type": "integer"}, "message": string},
            },
        }
    else:
        error = {
            "type": "object",
            "required": ["errors"],
            "properties": {
                "errors": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["request_id", "code", "status", "title", "detail"],
                        "properties": {
                            # request_id runs first in both pipelines: every error has one.
                            "request_id": {"type": "string", "pattern": _REQUEST_ID_PATTERN},
                            # demo.*, and the filters' own: tenancy.*, idempotency.*, ...
                            "code": {"type": "string", "pattern": r"^[a-z]+(\.[a-z0-9-]+)+$"},
                            "status": {"type": "integer"},
                            "title": string,
                            "detail": string,
                        },
                    },
                }
            },
        }
    return {
        "Error": error,
        "Version": version,
        "Versions": {
            "type": "object",
            "required": ["versions"],
            "properties": {"versions": {"type": "array", "items": version}},
        },
        "VersionDocument": {"type": "object", "required": ["version"], "properties": {"version": version}},
        "Server": server,
        "ServerEnvelope": {"type": "object", "required": ["server"], "properties": {"server": server}},
        "ServerList": {
            "type": "object",
            "required": ["servers"],
            "properties": {
                "servers": {"type": "array", "items": server},
                # nova's: only when the page is full, the one link to the next page.
                "servers_links": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["rel", "href"],
                        "properties": {"rel": {"const": "next"}, "href": string},
                        "additionalProperties": False,
                    },
                },
            },
            "additionalProperties": False,
        },
        "ServerCreate": {
            "type": "object",
            "required": ["server"],
            "properties": {
                "server": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string", "minLength": 1, "maxLength": 255},
                        "tags": {"$ref": "#/components/schemas/TagList"},
                    },
                }
            },
            "example": {"server": {"name": "web1"}},
        },
        "TagList": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": 60, "pattern": "^[^,/]+$"},
            "maxItems": 50,
        },
        "Tags": {
            "type": "object",
            "required": ["tags"],
            "properties": {"tags": {"$ref": "#/components/schemas/TagList"}},
        },
        "Service": service,
        "ServiceList": {
            "type": "object",
            "required": ["services"],
            "properties": {"services": {"type": "array", "items": service}},
        },
        "ServiceEnvelope": {
            "type": "object",
            "required": ["service"],
            # A legacy action (below 2.53) answers {"host", "binary", "status" or "forced_down", ...}.
            "properties": {
                "service": {
                    "oneOf": [
                        service,
                        {
                            "type": "object",
                            "required": ["host", "binary"],
                            "properties": {
                                "host": string,
                                "binary": string,
                                "status": {"enum": ["enabled", "disabled"]},
                                "disabled_reason": string,
                                "forced_down": {"type": "boolean"},
                            },
                            "additionalProperties": False,
                        },
                    ]
                }
            },
        },
        "ServiceUpdate": {
            "type": "object",
            "description": "From 2.53: status, disabled_reason, forced_down. Below it, a legacy action"
            " (enable, disable, disable-log-reason, force-down) takes host and binary.",
            "properties": {
                "status": {"enum": ["enabled", "disabled"]},
                "disabled_reason": {"type": "string", "minLength": 1, "maxLength": 255},
                "forced_down": {"type": "boolean"},
                "host": string,
                "binary": string,
            },
            "example": {"status": "disabled", "disabled_reason": "maintenance"},
        },
        "Hypervisor": hypervisor,
        "HypervisorList": {
            "type": "object",
            "required": ["hypervisors"],
            "properties": {"hypervisors": {"type": "array", "items": hypervisor}},
        },
        "HypervisorEnvelope": {
            "type": "object",
            "required": ["hypervisor"],
            "properties": {"hypervisor": hypervisor},
        },
    }


def _error_of_status(status: int, error_format: str) -> dict:
    """The error body of an answer with *status*: the shape, and the status it names is that one."""
    if error_format == "nova":
        same = {"additionalProperties": {"properties": {"code": {"const": status}}}}
    else:
        same = {"properties": {"errors": {"items": {"properties": {"status": {"const": status}}}}}}
    return {"allOf": [_ERROR, same]}


def _with_request_id(document: dict) -> dict:
    """Every answer of *document* carries ``x-openstack-request-id`` (request_id is first in both pipelines)."""
    header = {"$ref": "#/components/headers/x-openstack-request-id"}
    # But gunicorn's own 414, which no filter sees.
    answers = [a for name, a in document["components"]["responses"].items() if name != "UriTooLong"]
    for item in document["paths"].values():
        for method in [m for m in item if m in _METHODS]:
            answers.extend(a for a in item[method]["responses"].values() if "$ref" not in a)
    for answer in answers:
        answer.setdefault("headers", {})["x-openstack-request-id"] = header
    return document


def _components(error_format: str) -> dict:
    version_header = {
        "x-openstack-request-id": {
            "description": "The request's id (oslo.middleware's request_id), in every answer.",
            "required": True,
            "schema": {"type": "string", "pattern": _REQUEST_ID_PATTERN},
        },
        "OpenStack-API-Version": {
            "description": "The microversion the answer was served at.",
            "required": True,
            "schema": {"type": "string", "pattern": r"^compute 2\.[0-9]+$"},
        },
        "X-OpenStack-Nova-API-Version": {
            "description": "The same, in nova's legacy header.",
            "required": True,
            "schema": {"type": "string", "pattern": r"^2\.[0-9]+$"},
        },
    }
    responses = {}
    for status, (name, description) in _ERRORS.items():
        headers = None
        schema = _error_of_status(int(status), error_format)
        if status == "301":
            # tenant_admin's redirect: {"location": the new URL}, as in the header.
            headers = {"Location": {"required": True, "schema": {"type": "string"}}}
            schema = {"type": "object", "required": ["location"], "properties": {"location": {"type": "string"}}}
        elif status == "405":
            headers = {"Allow": {"required": True, "schema": {"type": "string"}}}
        elif status == "503":
            headers = {"Retry-After": {"required": True, "schema": {"type": "string", "pattern": "^[0-9]+$"}}}
        elif status == "414":
            responses[name] = {"description": description, "content": {"text/html": {"schema": {"type": "string"}}}}
            continue
        responses[name] = _json(schema, description, headers)
    return {
        "schemas": _schemas(error_format),
        "responses": responses,
        "headers": version_header,
        "parameters": {
            "tenant_id": {
                "name": "tenant_id",
                "in": "path",
                "required": True,
                "description": "The tenant (created on the admin endpoint first).",
                "schema": {"type": "string", "minLength": 1, "maxLength": 255},
            },
            "microversion": {
                "name": "OpenStack-API-Version",
                "in": "header",
                "required": False,
                "description": "The microversion asked for (none: 2.1; tags from 2.26, uuids from 2.53).",
                "schema": {"enum": ["compute 2.1", "compute 2.26", "compute 2.52", "compute 2.53", "compute latest"]},
            },
        },
    }


def _versioned(schema_name: str, description: str, **extra) -> dict:
    """A 2xx JSON answer under /v2.1: it names the microversion it was served at."""
    headers = {
        "OpenStack-API-Version": {"$ref": "#/components/headers/OpenStack-API-Version"},
        "X-OpenStack-Nova-API-Version": {"$ref": "#/components/headers/X-OpenStack-Nova-API-Version"},
    }
    headers.update(extra.pop("headers", {}))
    return _json(_ref("schemas", schema_name), description, headers, extra.pop("links", None))


def _no_content(description: str) -> dict:
    return {"description": description}


def _path_param(name: str, description: str) -> dict:
    return {"name": name, "in": "path", "required": True, "description": description, "schema": {"type": "string"}}


def _server_links(tenant: str = "$request.path.tenant_id", server: str = "$response.body#/server/id") -> dict:
    """OpenAPI links from a server's answer to the calls on it (schemathesis's stateful phase follows them)."""
    params = {"tenant_id": tenant, "server_id": server}
    # The tag API's paths name the server resource_id, as the library's fragment does.
    tag_params = {"tenant_id": tenant, "resource_id": server}
    return {
        "ShowServer": {"operationId": "showServer", "parameters": params},
        "DeleteServer": {"operationId": "deleteServer", "parameters": params},
        "ListServerTags": {"operationId": "listServerTags", "parameters": tag_params},
        "ReplaceServerTags": {"operationId": "replaceServerTags", "parameters": tag_params},
        "AddServerTag": {"operationId": "addServerTag", "parameters": tag_params},
    }


def _servers_paths() -> dict:
    """The servers and their tags, under ``/v2.1/{tenant_id}``."""
    tenant = [_ref("parameters", "tenant_id"), _ref("parameters", "microversion")]
    server = tenant + [_path_param("server_id", "A server of the tenant.")]
    tagged = tenant + [_path_param("resource_id", "A server of the tenant.")]
    tag = tagged + [_path_param("tag", "A tag (1 to 60 characters, no comma or slash).")]
    tag_filters = [
        {"name": name, "in": "query", "required": False, "description": description, "schema": {"type": "string"}}
        for name, description in (
            ("tags", "Servers with every tag of this comma-separated list (from 2.26)."),
            ("tags-any", "Servers with any of them."),
            ("not-tags", "Servers with none of them."),
            ("not-tags-any", "Servers without all of them."),
        )
    ]
    paging = [
        {
            "name": "limit",
            "in": "query",
            "required": False,
            "description": "The most servers of the page (digits; above the demo's max_limit, 1000, capped at it;"
            " none: that many; 0: an empty page).",
            "schema": {"type": "integer", "minimum": 0, "maximum": MAX_LIMIT_VALUE},
        },
        {
            "name": "marker",
            "in": "query",
            "required": False,
            "description": "The servers after this one (the last id of the previous page; servers are ordered by"
            " id). Not one of the tenant's servers: 400.",
            "schema": {"type": "string", "minLength": 1, "maxLength": MAX_MARKER_LENGTH},
        },
    ]
    servers = _TENANT + "/servers"
    moved = ("301",)
    tag_body = {"required": True, "content": {_JSON: {"schema": _ref("schemas", "Tags")}}}

    def listing(operation_id: str, summary: str) -> dict:
        return _operation(
            operation_id,
            summary,
            {"200": _versioned("ServerList", "A page of the servers, by id; servers_links to the next page.")},
            *_UNDER_TENANT,
            parameters=tag_filters + paging,
        )

    return {
        servers: {
            "parameters": tenant,
            "get": listing("listServers", "The tenant's servers (tags from 2.26, filtered by the tag parameters)."),
            "post": _operation(
                "createServer",
                "Create a server (tags in the body from 2.52).",
                {
                    "201": _versioned(
                        "ServerEnvelope",
                        "The new server.",
                        headers={"Location": {"required": True, "schema": {"type": "string"}}},
                        links=_server_links(),
                    )
                },
                *(_UNDER_TENANT + _WITH_BODY),
                requestBody={"required": True, "content": {_JSON: {"schema": _ref("schemas", "ServerCreate")}}},
            ),
        },
        servers + "/detail": {
            "parameters": tenant,
            "get": listing("listServersDetail", "The same list (a demo server has no more fields)."),
        },
        servers + "/{server_id}": {
            "parameters": server,
            "get": _operation(
                "showServer",
                "One server.",
                {"200": _versioned("ServerEnvelope", "The server.")},
                *(_UNDER_TENANT + moved),
            ),
            "delete": _operation(
                "deleteServer",
                "Delete a server (and its tags).",
                {"204": _no_content("Deleted.")},
                *(_UNDER_TENANT + moved),
            ),
        },
        servers + "/{resource_id}/tags": {
            "parameters": tagged,
            "get": _operation(
                "listServerTags",
                "The server's tags (from 2.26; 404 below).",
                {"200": _versioned("Tags", "The tags.")},
                *(_UNDER_TENANT + moved),
            ),
            "put": _operation(
                "replaceServerTags",
                "Replace the server's tags (at most 50).",
                {"200": _versioned("Tags", "The tags now.")},
                *(_UNDER_TENANT + moved + _WITH_BODY),
                requestBody=tag_body,
            ),
            "delete": _operation(
                "deleteServerTags",
                "Remove every tag of the server.",
                {"204": _no_content("Removed.")},
                *(_UNDER_TENANT + moved),
            ),
        },
        servers + "/{resource_id}/tags/{tag}": {
            "parameters": tag,
            "get": _operation(
                "checkServerTag",
                "Whether the server has the tag (204), or not (404).",
                {"204": _no_content("It has.")},
                *(_UNDER_TENANT + moved),
            ),
            "put": _operation(
                "addServerTag",
                "Add a tag: 201 (with Location), or 204 if the server has it.",
                {
                    "201": {
                        "description": "Added.",
                        "headers": {"Location": {"required": True, "schema": {"type": "string"}}},
                    },
                    "204": _no_content("The server had it."),
                },
                *(_UNDER_TENANT + moved),
            ),
            "delete": _operation(
                "deleteServerTag",
                "Remove a tag (404 if the server has not it).",
                {"204": _no_content("Removed.")},
                *(_UNDER_TENANT + moved),
            ),
        },
    }


def _cells_paths(scope: str, scope_parameters: list, suffix: str, errors: tuple) -> dict:
    """``os-services`` and ``os-hypervisors`` under *scope* (``/v2.1`` or ``/v2.1/{tenant_id}``)."""
    service_id = _path_param(
        "id",
        "A service id (an integer below 2.53, a uuid from it), or below 2.53"
        " a legacy action: enable, disable, disable-log-reason, force-down.",
    )
    hypervisor_id = _path_param("id", "A hypervisor id (an integer below 2.53, a uuid from it).")
    pattern = _path_param("pattern", "A substring of the hypervisor hostname.")
    ids = ("503",)  # id_resolver: a cell that did not answer about the id
    # The ids are {id}, as the id_resolver filter's path items name them.
    first_service = {"id": "$response.body#/services/0/id"}
    first_hypervisor = {"id": "$response.body#/hypervisors/0/id"}
    if scope_parameters and "tenant_id" in scope:
        first_service["tenant_id"] = first_hypervisor["tenant_id"] = "$request.path.tenant_id"

    def read(parameters: list, operation_id: str, summary: str, schema: str, description: str) -> dict:
        # A GET-only route of the hypervisors (a cell may not answer about the id: 503).
        return {
            "parameters": parameters,
            "get": _operation(
                operation_id + suffix, summary, {"200": _versioned(schema, description)}, *(errors + ids)
            ),
        }

    return {
        scope + "/os-services": {
            "parameters": scope_parameters,
            "get": _operation(
                "listServices" + suffix,
                "Every cell's services (the cells that answered).",
                {
                    "200": _versioned(
                        "ServiceList",
                        "The services.",
                        links={
                            "UpdateService": {"operationId": "updateService" + suffix, "parameters": first_service},
                            "DeleteService": {"operationId": "deleteService" + suffix, "parameters": first_service},
                        },
                    )
                },
                *errors,
                parameters=[
                    {"name": "host", "in": "query", "required": False, "schema": {"type": "string"}},
                    {"name": "binary", "in": "query", "required": False, "schema": {"type": "string"}},
                ],
            ),
        },
        scope + "/os-services/{id}": {
            "parameters": scope_parameters + [service_id],
            "put": _operation(
                "updateService" + suffix,
                "Enable, disable or force down a service (2.53); nova's legacy actions below it.",
                {"200": _versioned("ServiceEnvelope", "The service.")},
                *(errors + ids + _WITH_BODY),
                requestBody={"required": True, "content": {_JSON: {"schema": _ref("schemas", "ServiceUpdate")}}},
            ),
            "delete": _operation(
                "deleteService" + suffix,
                "Delete a service.",
                {"204": _no_content("Deleted.")},
                *(errors + ids),
            ),
        },
        scope + "/os-hypervisors": {
            "parameters": scope_parameters,
            "get": _operation(
                "listHypervisors" + suffix,
                "Every cell's hypervisors; from 2.53 a hostname search.",
                {
                    "200": _versioned(
                        "HypervisorList",
                        "The hypervisors.",
                        links={
                            "ShowHypervisor": {
                                "operationId": "showHypervisor" + suffix,
                                "parameters": first_hypervisor,
                            },
                            "HypervisorUptime": {
                                "operationId": "hypervisorUptime" + suffix,
                                "parameters": first_hypervisor,
                            },
                        },
                    )
                },
                *(errors + ids),
                parameters=[
                    {"name": name, "in": "query", "required": False, "schema": {"type": "string"}}
                    for name in ("hypervisor_hostname_pattern", "hypervisor_hostname")
                ],
            ),
        },
        scope + "/os-hypervisors/detail": read(
            scope_parameters, "listHypervisorsDetail", "The same, with details.", "HypervisorList", "The hypervisors."
        ),
        scope + "/os-hypervisors/{id}": read(
            scope_parameters + [hypervisor_id],
            "showHypervisor",
            "One hypervisor.",
            "HypervisorEnvelope",
            "The hypervisor.",
        ),
        scope + "/os-hypervisors/{id}/uptime": read(
            scope_parameters + [hypervisor_id],
            "hypervisorUptime",
            "A hypervisor's uptime.",
            "HypervisorEnvelope",
            "The hypervisor and its uptime.",
        ),
        scope + "/os-hypervisors/{pattern}/search": read(
            scope_parameters + [pattern],
            "searchHypervisors",
            "Below 2.53 only: the hypervisors whose hostname contains the pattern.",
            "HypervisorList",
            "The hypervisors.",
        ),
    }


def demo_document(error_format: str = "api-wg", tenant_version_document: bool = True) -> dict:
    """The OpenAPI 3.1 document of the demo app's own routes, error bodies in *error_format*.

    *tenant_version_document* is whether the app answers ``GET /v2.1/{tenant_id}`` (not
    where a ``tenant_admin`` with its admin API answers it first).

    >>> document = demo_document()
    >>> document["paths"]["/v2.1/{tenant_id}/servers"]["post"]["operationId"]
    'createServer'
    >>> document["paths"]["/v2.1/{tenant_id}/servers"]["get"]["responses"]["404"]
    {'$ref': '#/components/responses/demo.NotFound'}
    """
    version = [_ref("parameters", "microversion")]
    tenant = [_ref("parameters", "tenant_id")] + version
    paths = {
        "/": {
            "get": _operation(
                "listVersions",
                "The versions document (not under microversion control).",
                {"200": _json(_ref("schemas", "Versions"), "The versions.")},
            )
        },
        _V: {
            "parameters": version,
            "get": _operation(
                "showVersion",
                "The version document.",
                {"200": _versioned("VersionDocument", "The version.")},
                *_UNDER_VERSION,
            ),
        },
    }
    if tenant_version_document:
        paths[_TENANT] = {
            "parameters": tenant,
            "get": _operation(
                "showTenantVersion",
                "The version document at the tenant's URL (python-novaclient discovers versions there).",
                {"200": _versioned("VersionDocument", "The version.")},
                *_UNDER_TENANT,
            ),
        }
    paths.update(_servers_paths())
    paths.update(_cells_paths(_V, version, "", _UNDER_VERSION + ("404",)))
    paths.update(_cells_paths(_TENANT, tenant, "InTenant", _UNDER_TENANT))
    return _namespaced(
        _with_request_id(
            {
                "openapi": openapi.OPENAPI_VERSION,
                "info": {
                    "title": "tenancy_mw demo_compute",
                    "version": str(microversions.MAX_VERSION),
                    "description": "The demo's compute-style API behind the tenancy_mw filters (examples/README.rst).",
                },
                "paths": paths,
                "components": _components(error_format),
            }
        )
    )


def _namespaced(document: dict) -> dict:
    """*document* with every component named ``demo.<name>`` (and every ``$ref`` to it), so
    merging the library's fragment (its own ``Error``, say) never replaces one of the demo's."""
    text = re.sub(r'"#/components/([A-Za-z]+)/', r'"#/components/\1/demo.', json.dumps(document))
    renamed = json.loads(text)
    renamed["components"] = {
        kind: {"demo." + name: value for name, value in entries.items()}
        for kind, entries in renamed["components"].items()
    }
    return renamed


# Building an endpoint's document ------------------------------------------------------------


def _template(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "{}", path)


def complete_document(own: dict, fragment: dict, app=None) -> dict:
    """*own* (the demo's) merged with *fragment* (the library's), without what *app*'s ``admin_cull`` refuses.

    :func:`tenancy_mw.openapi.merge` adds the filters' parameters and answers to the
    calls both describe (the servers list and create, the tag API); :func:`tenancy_mw.openapi.cull`
    leaves out the admin calls of a public chain.  A path the two spell with other
    parameter names is an error: the demo names its parameters as the library does.
    """
    theirs = {_template(path): path for path in fragment.get("paths", {})}
    for path in own["paths"]:
        other = theirs.get(_template(path), path)
        if other != path:
            raise ValueError("the demo's %s is the library's %s: name the parameters alike" % (path, other))
    document = _flattened(openapi.merge(own, fragment))
    _not_a_sibling(document, fragment)
    return openapi.cull(document, app) if app is not None else document


def _flattened(document: dict) -> dict:
    """*document* with each path item's ``parameters`` moved into its calls, a call's own of the same
    name and place kept: what OpenAPI means, spelt out for generators (schemathesis) that read the
    path's where the call overrides it."""

    def key(parameter: dict) -> tuple[str, str]:
        if "$ref" in parameter:
            parameter = document["components"]["parameters"][parameter["$ref"].rsplit("/", 1)[1]]
        return parameter["name"], parameter["in"]

    for item in document["paths"].values():
        shared = item.pop("parameters", [])
        for method in [m for m in item if m in _METHODS]:
            own = item[method].get("parameters", [])
            listed = {key(p) for p in own}
            item[method]["parameters"] = [p for p in shared if key(p) not in listed] + own
    return document


def _without_words(schema: dict, words: list) -> dict:
    """*schema* that no longer admits *words*: taken out of its ``enum`` alternatives, however
    deep in ``anyOf``/``allOf`` (where a generator reads them), and refused by a ``not`` where it
    may still admit them (a schema whose patterns match none of them is left as it is: a ``not``
    would only show a generator a value to send as a wrong one)."""
    narrowed = _without_enum_words(copy.deepcopy(schema), words)
    patterns = re.findall(r'"pattern": "((?:[^"\\]|\\.)*)"', json.dumps(narrowed))
    if patterns and "enum" not in json.dumps(narrowed):
        if not any(re.search(json.loads('"%s"' % pattern), word) for pattern in patterns for word in words):
            return narrowed
    return {"allOf": [narrowed, {"not": {"enum": words}}]}


def _without_enum_words(schema: dict, words: list) -> dict:
    if isinstance(schema.get("enum"), list):
        schema["enum"] = [value for value in schema["enum"] if value not in words]
    for combinator in ("anyOf", "allOf", "oneOf"):
        if isinstance(schema.get(combinator), list):
            parts = [_without_enum_words(part, words) for part in schema[combinator]]
            # An alternative left with no value is no alternative (in allOf it would admit nothing: kept).
            schema[combinator] = [p for p in parts if p.get("enum", True) != []] if combinator != "allOf" else parts
    return schema


def _not_a_sibling(document: dict, fragment: dict) -> None:
    """A path parameter of the library's routes never takes a value that is a sibling route's literal segment.

    ``/v2.1/os-hypervisors/{id}`` where ``/v2.1/os-hypervisors/detail`` is another route:
    ``detail`` reaches the list, not a hypervisor (a client or a fuzzer that takes the
    id's schema for the whole truth sends it and gets a list).  Each call's parameter
    (the path's are in the calls: :func:`_flattened`) takes its schema less those words,
    where *fragment* (the library's) lists it on the path: the ``id_resolver`` routes, whose
    ids take the words a service routes elsewhere.  The demo's own ids are uuids.
    """
    library = {
        (path, parameter.get("name"))
        for path, item in fragment.get("paths", {}).items()
        for parameter in item.get("parameters", [])
    }
    split = {path: path.split("/") for path in document["paths"]}
    for path, item in document["paths"].items():
        for method in [m for m in item if m in _METHODS]:
            parameters = item[method].get("parameters", [])
            for n, parameter in enumerate(parameters):
                if "$ref" in parameter or parameter.get("in") != "path" or (path, parameter["name"]) not in library:
                    continue
                at = split[path].index("{%s}" % parameter["name"])
                siblings = sorted(
                    other[at]
                    for other in split.values()
                    if len(other) == len(split[path])
                    and not other[at].startswith("{")
                    and all(a == b for i, (a, b) in enumerate(zip(other, split[path], strict=True)) if i != at)
                )
                if siblings:
                    parameters[n] = dict(parameter, schema=_without_words(parameter.get("schema", {}), siblings))


def endpoint_document(app) -> dict:
    """The complete document of the endpoint whose chain starts at *app*: the demo's routes and the library's.

    The library's fragment is :func:`tenancy_mw.openapi.describe_pipeline` of the chain
    (the tenant admin API where a ``tenant_admin`` serves it, the tag API of the servers,
    the filters' parameters and answers), with ``/v2.1`` as the mount: the demo serves that
    one version, so the paths name it (no ``{version}`` parameter).  Every operation an
    ``admin_cull`` in the chain refuses is left out (:func:`complete_document`).
    """
    from tenancy_mw.tenants.admin.filter import TenantAdmin

    chain, seen = [], set()
    while app is not None and id(app) not in seen:
        seen.add(id(app))
        chain.append(app)
        app = getattr(app, "application", None)
    error_format = next((a.error_format for a in chain if type(a).__name__ == "DemoCompute"), "api-wg")
    admin_api = any(isinstance(a, TenantAdmin) and a.admin_api for a in chain)
    fragment = openapi.describe_pipeline(
        chain[0], tag_collections=("servers",), prefix=_V, tag_error_format=error_format
    )
    # The demo routes its servers under the project id only: the tenant-less forms tenant_path lets
    # through (/v2.1/servers, its tag API) reach the demo's 404, so they are not part of its API.
    tenantless = _V + "/servers"
    fragment["paths"] = {
        path: item
        for path, item in fragment["paths"].items()
        if path != tenantless and not path.startswith(tenantless + "/")
    }
    own = demo_document(error_format, tenant_version_document=not admin_api)
    return complete_document(own, fragment, chain[0])


class OpenApiFilter:
    """Answers ``GET``/``HEAD /openapi.json`` with its endpoint's document, built once from the chain below.

    :param app: the rest of the pipeline (its chain is what the document describes).
    """

    def __init__(self, app: Callable) -> None:
        #: The next app (so a describer walking ``.application`` passes through).
        self.application = app
        #: The endpoint's document.
        self.document = endpoint_document(app)
        self._body = json.dumps(self.document, ensure_ascii=False, sort_keys=True).encode("utf-8")

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        """Serve the document at :data:`DOCUMENT_PATH`; pass every other request on."""
        path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
        if path != DOCUMENT_PATH or environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return self.application(environ, start_response)
        headers = [("Content-Type", _JSON), ("Content-Length", str(len(self._body)))]
        start_response("200 OK", headers)
        return [] if environ["REQUEST_METHOD"] == "HEAD" else [self._body]


def filter_factory(global_conf: dict, **local_conf: str) -> Callable[[Callable], OpenApiFilter]:
    """``paste.filter_factory`` of :class:`OpenApiFilter` (no options)."""
    if local_conf:
        raise ValueError("demo_compute.openapi: no options, got %s" % ", ".join(sorted(local_conf)))
    return OpenApiFilter


#: The environment variables that point the demo's databases at a folder (oslo.config's
#: environment source, as examples/README.rst tells operators), by the file each names.
_STATE_FILES = {
    "OS_DEMO_COMPUTE__DATABASE_URL": "demo.sqlite",
    "OS_IDEMPOTENCY__CONNECTION": "demo.sqlite",
    "OS_TENANT_ADMIN__CONNECTION": "tenants.sqlite",
}


def documents(state_dir: str) -> dict[str, dict]:
    """Each endpoint's complete document, ``{"public": ..., "admin": ...}``, as the demo serves them.

    Loads examples/api-paste.ini's two pipelines, as ``make demo`` does, with their SQLite
    files in *state_dir* (nothing is written to examples/state/); the Sphinx docs render
    the result (``doc/conf.py``)::

        >>> import tempfile
        >>> found = documents(tempfile.mkdtemp())
        >>> tenant = "/v2.1/{tenant_id}"  # the tenant admin API's PUT is the admin endpoint's only
        >>> "put" in found["admin"]["paths"][tenant], "put" in found["public"]["paths"][tenant]
        (True, False)
    """
    import os

    from paste.deploy import loadapp

    from demo_compute.app import close_pipeline

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def url(name: str) -> str:
        return "sqlite:///" + os.path.join(state_dir, name)

    settings = {key: url(name) for key, name in _STATE_FILES.items()}
    settings["OS_ID_RESOLVER__CELLS"] = "cell1=%s, cell2=%s" % (url("cell1.sqlite"), url("cell2.sqlite"))
    saved = {key: os.environ.get(key) for key in settings}
    os.environ.update(settings)
    try:
        found = {}
        for role, pipeline in (("public", "main"), ("admin", "admin")):
            loaded = app = loadapp("config:" + os.path.join(here, "api-paste.ini"), name=pipeline)
            while not isinstance(app, OpenApiFilter):
                app = app.application
            found[role] = app.document
            close_pipeline(loaded)
        return found
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
