"""The drafts a fragment is built from: operations, their responses, and the shared schemas.

Every filter's describer (the other private modules of this package) adds
:class:`Operation` objects it answers itself, and contributes parameters
and responses to the operations it passes on; :func:`render` turns the
drafts into OpenAPI objects.  Pure: no WSGI machinery, no SQL.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tenancy_mw.core.errors import error_body
from tenancy_mw.tags.model import MAX_TAG_BYTES
from tenancy_mw.tenants.ids import MAX_TENANT_ID_LENGTH

__all__ = [
    "ERROR_SCHEMA_NAMES",
    "Context",
    "Operation",
    "ResponseDraft",
    "component_schemas",
    "error_response",
    "render",
    "schema_ref",
]

#: The component schema of each ``error_format``.
ERROR_SCHEMA_NAMES = {"api-wg": "ApiWgErrors", "nova": "NovaFault"}

# The patterns read the same in ECMA-262 (JSON Schema's dialect) and in Python's re (jsonschema's): [\s\S] is any
# character (ECMA's '.' stops at U+2028 and U+2029, which an id may hold), and the end is pinned by (?![\s\S])
# (Python's '$' also matches before a final newline).
_END = r"$(?![\s\S])"
# Text that reads as a percent-escape, which a tenant id or a tag may not hold (they would travel double-encoded).
_NO_ESCAPE = r"(?![\s\S]*%(?:[0-9A-Fa-f]{2}|[Uu][0-9A-Fa-f]{4}))"
# No '/', no control character; '.' and '..' are dot segments.
TENANT_ID_PATTERN = r"^(?!\.\.?$)" + _NO_ESCAPE + r"[^/\x00-\x1f\x7f]+" + _END
TAG_PATTERN = r"^(?!\.\.?$)" + _NO_ESCAPE + r"[^/,\x00-\x1f\x7f]+" + _END


def _literal(text: str) -> str:
    """*text* as a regular expression matching itself, in ECMA-262 too (whose Unicode mode refuses ``\\-``)."""
    return re.sub(r"[\\^$.|?*+()\[\]{}]", lambda m: "\\" + m.group(), text)


def schema_ref(name: str) -> dict:
    """A ``$ref`` to the component schema *name*."""
    return {"$ref": "#/components/schemas/" + name}


@dataclass
class ResponseDraft:
    """One status of one operation while it is built: who answers it, in which shape, with which headers."""

    descriptions: list[str] = field(default_factory=list)
    #: ``error_format`` values of the filters answering this status with a JSON error.
    error_formats: set[str] = field(default_factory=set)
    #: A non-error body's schema (the first one given wins; the same status never carries two).
    schema: dict | None = None
    headers: dict[str, dict] = field(default_factory=dict)

    def add(
        self,
        description: str,
        *,
        error_format: str | None = None,
        schema: dict | None = None,
        headers: dict[str, dict] | None = None,
    ) -> None:
        """Add one answerer's *description*, its error shape or body *schema*, its *headers*."""
        if description not in self.descriptions:
            self.descriptions.append(description)
        if error_format is not None:
            self.error_formats.add(error_format)
        if schema is not None and self.schema is None:
            self.schema = schema
        self.headers.update(headers or {})


@dataclass
class Operation:
    """One path and method while it is built.

    *depth* is where in the chain it is answered: the filters before it
    (smaller depth) contribute to it, the ones after never see it.
    *kind* is ``"admin"``, ``"tags"``, ``"list"`` or ``"service"``.
    """

    path: str
    method: str
    depth: int
    kind: str
    summary: str
    parameters: list[dict] = field(default_factory=list)
    request_body: dict | None = None
    responses: dict[str, ResponseDraft] = field(default_factory=dict)

    @property
    def under_tenant(self) -> bool:
        """Whether the path carries the tenant."""
        return "{tenant_id}" in self.path

    def respond(self, status: int | str, description: str, **details: Any) -> None:
        """Add an answer: *status*, what it means, and :meth:`ResponseDraft.add`'s *details*."""
        self.responses.setdefault(str(status), ResponseDraft()).add(description, **details)

    def refuse(self, status: int | str, code: str, why: str, error_format: str, headers: dict | None = None) -> None:
        """Add a JSON error answer: *status* with error *code* (a prefix ending in ``.`` or ``-`` for a family)."""
        family = code + "*" if code.endswith((".", "-")) else code
        self.respond(status, "``%s``: %s" % (family, why), error_format=error_format, headers=headers)

    def parameter(self, parameter: dict) -> None:
        """Add *parameter* unless one of that name and place is there already."""
        if not any(p["name"] == parameter["name"] and p["in"] == parameter["in"] for p in self.parameters):
            self.parameters.append(parameter)


@dataclass
class Context:
    """What the whole chain decides for every describer: the mount, the version, the tenant layout."""

    prefix: str
    version_pattern: str
    #: Whether the version segment is a path parameter (not the mount's last segment).
    version_in_path: bool
    tenant_in_path: bool
    tenant_id_pattern: str | None
    tag_collections: tuple[str, ...]
    #: The ``error_format`` the tag API is described with.
    tag_error_format: str
    #: The names read as tenant-less collections where a tenant could be (``tenant_in_path = optional``).
    tenantless_collections: tuple[str, ...] = ()
    #: ``tenant_in_path`` of the layout filter (``tenant_path``, else ``tenant_admin``); ``None`` without one.
    tenant_layout: str | None = None
    #: Whether ``tenant_path`` takes a confirmed token's project as the tenant of a path without one.
    token_tenant: bool = False
    #: Where the outermost ``tenant_path`` is in the chain (``None``: there is none).
    tenant_path_depth: int | None = None
    operations: list[Operation] = field(default_factory=list)
    #: Path items without operations of their own (``id_resolver``'s routes), by path.
    path_items: dict[str, dict] = field(default_factory=dict)
    #: Reusable responses (``components/responses``), by name.
    responses: dict[str, dict] = field(default_factory=dict)

    def path(self, *segments: str) -> str:
        """The path template of *segments* below the version (and tenant, when the layout has it)."""
        head = [self.prefix.rstrip("/")] + (["{version}"] if self.version_in_path else [])
        return "/".join(head + list(segments)) or "/"

    def tenant_path(self, *segments: str) -> str:
        """:meth:`path` below the tenant segment."""
        return self.path("{tenant_id}", *segments)

    def collection_forms(self, collection: str) -> list[Callable[..., str]]:
        """How *collection*'s calls are spelled: :meth:`tenant_path`, :meth:`path`, or both, as the layout reads them.

        ``always`` (or no layout filter): under the tenant only; ``never``:
        without it; ``optional``: under the tenant, and without it when the
        layout reads the name as a tenant-less collection (else
        ``/{version}/widgets`` is the tenant ``widgets``).

        Example::

            >>> context = Context("", "v[0-9.]+", True, True, None, (), "api-wg", ("servers",), "optional")
            >>> [form("servers") for form in context.collection_forms("servers")]
            ['/{version}/{tenant_id}/servers', '/{version}/servers']
            >>> [form("widgets") for form in context.collection_forms("widgets")]
            ['/{version}/{tenant_id}/widgets']
        """
        if self.tenant_layout == "never":
            return [self.path]
        if self.tenant_layout == "optional" and collection in self.tenantless_collections:
            return [self.tenant_path, self.path]
        return [self.tenant_path]

    def tenant_path_before(self, depth: int) -> bool:
        """Whether a ``tenant_path`` runs before the filter at *depth* (it has found the tenant, or refused)."""
        return self.tenant_path_depth is not None and self.tenant_path_depth < depth

    def below(self, depth: int) -> list[Operation]:
        """The operations answered after the filter at *depth*: those it passes on."""
        return [op for op in self.operations if op.depth > depth]

    def path_parameters(self, path: str) -> list[dict]:
        """The path parameters of the template *path*, in order."""
        return [self._path_parameter(name) for name in re.findall(r"{(\w+)}", path)]

    def _path_parameter(self, name: str) -> dict:
        if name == "version":
            schema: dict = {"type": "string", "pattern": "^(?:%s)$" % self.version_pattern}
            what = "The API version segment (the filters' version_pattern)."
        elif name == "tenant_id":
            schema = schema_ref("TenantId")
            rules: list[dict] = [{"pattern": "^(?:%s)$" % self.tenant_id_pattern}] if self.tenant_id_pattern else []
            if self.tenantless_collections:
                # TenantLayout.is_collection: a listed name, or one with a format suffix (volumes.json).
                names = "|".join(_literal(name) for name in sorted(self.tenantless_collections))
                rules.append({"not": {"pattern": r"^(?:%s)(?:\.[^.]+)?%s" % (names, _END)}})
            if rules:
                schema = {"allOf": [schema, *rules]}
            what = "The tenant id, percent-encoded as one path segment."
        elif name == "tag":
            schema, what = schema_ref("Tag"), "The tag, percent-encoded as one path segment."
        elif name == "resource_path":
            schema = {"type": "string", "minLength": 1}
            what = "The resource's path below the tenant (one or more segments, each percent-encoded)."
        else:
            schema, what = {"type": "string", "minLength": 1, "maxLength": 255}, "The resource's id."
        return {"name": name, "in": "path", "required": True, "description": what, "schema": schema}


def _error_schema(status: int, error_format: str) -> dict:
    """The body of an error of *status* in *error_format*: the shape, with the status it names."""
    if error_format == "nova":
        name = next(iter(error_body(status, "x", "x", error_format="nova")))
        return {
            "type": "object",
            "required": [name],
            "additionalProperties": False,
            "properties": {name: {"allOf": [schema_ref("NovaFaultBody"), {"properties": {"code": {"const": status}}}]}},
        }
    pinned = {"properties": {"errors": {"items": {"properties": {"status": {"const": status}}}}}}
    return {"allOf": [schema_ref("ApiWgErrors"), pinned]}


def error_response(status: int, description: str, error_format: str, headers: dict[str, dict]) -> dict:
    """A response object of a JSON error of *status* in *error_format*, with *headers*."""
    return {
        "description": description,
        "headers": dict(sorted(headers.items())),
        "content": {"application/json": {"schema": _error_schema(status, error_format)}},
    }


def _render_response(status: str, draft: ResponseDraft, method: str) -> dict:
    rendered: dict[str, Any] = {"description": "\n\n".join(draft.descriptions)}
    if draft.headers:
        rendered["headers"] = dict(sorted(draft.headers.items()))
    schema = draft.schema
    if schema is None and draft.error_formats:
        shapes = [
            _error_schema(int(status), fmt) if status.isdigit() else schema_ref(ERROR_SCHEMA_NAMES[fmt])
            for fmt in sorted(draft.error_formats)
        ]
        schema = shapes[0] if len(shapes) == 1 else {"anyOf": shapes}
    if schema is not None and method != "head":
        rendered["content"] = {"application/json": {"schema": schema}}
    return rendered


def render(operation: Operation, context: Context) -> dict:
    """The OpenAPI operation object of *operation*."""
    parameters = context.path_parameters(operation.path) + operation.parameters
    rendered: dict[str, Any] = {
        "summary": operation.summary,
        "operationId": _operation_id(operation),
        "parameters": parameters,
        "responses": {
            status: _render_response(status, operation.responses[status], operation.method)
            for status in sorted(operation.responses)
        },
    }
    if operation.request_body is not None:
        rendered["requestBody"] = operation.request_body
    if not parameters:
        del rendered["parameters"]
    return rendered


def _operation_id(operation: Operation) -> str:
    words = re.sub(r"[^A-Za-z0-9]+", "-", operation.path).strip("-")
    return "%s-%s" % (operation.method, words or "root")


def component_schemas() -> dict[str, dict]:
    """The schemas every fragment carries, by name (the same in every fragment, so they merge)."""
    return {
        "TenantId": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_TENANT_ID_LENGTH,
            "pattern": TENANT_ID_PATTERN,
            "description": "A tenant id (tenants spec): 1 to %d characters (code points), no '/'. This library also "
            "refuses control characters, '.' and '..', and text that reads as a percent-escape. In a URL it is "
            "percent-encoded as one path segment." % MAX_TENANT_ID_LENGTH,
        },
        "TenantRepresentation": {
            "type": "object",
            "description": "The JSON object an operator PUT for the tenant (empty: {}).",
        },
        "TenantSummary": _tenant_summary(),
        "MoveDocument": _move_document(),
        "Redirect": {
            "type": "object",
            "required": ["location"],
            "additionalProperties": False,
            "properties": {"location": {"type": "string"}},
        },
        "Tag": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_TAG_BYTES,
            "pattern": TAG_PATTERN,
            "description": "A tag: 1 to %d bytes of UTF-8, case sensitive; no '/', no ',', no control character, "
            "not '.' or '..', no text that reads as a percent-escape." % MAX_TAG_BYTES,
        },
        "TagList": {
            "type": "object",
            "required": ["tags"],
            "additionalProperties": False,
            "properties": {"tags": {"type": "array", "uniqueItems": True, "items": schema_ref("Tag")}},
            "description": "A resource's tags, at most the tag store's max_tags (50 by default).",
        },
        "ApiWgErrors": _api_wg_errors(),
        "NovaFault": {
            "type": "object",
            "minProperties": 1,
            "maxProperties": 1,
            "additionalProperties": schema_ref("NovaFaultBody"),
            "description": "nova's legacy fault body (error_format = nova): one member, named after the status.",
        },
        "NovaFaultBody": {
            "type": "object",
            "required": ["code", "message"],
            "additionalProperties": False,
            "properties": {"code": {"type": "integer"}, "message": {"type": "string"}},
            "description": "nova's legacy fault: the one member of the body, named after the status "
            "(badRequest, itemNotFound, conflictingRequest, ..., computeFault for the others).",
        },
    }


def _api_wg_errors() -> dict:
    error = {
        "type": "object",
        "required": ["request_id", "code", "status", "title", "detail"],
        "additionalProperties": False,
        "properties": {
            "request_id": {"type": ["string", "null"], "description": "oslo.middleware's request id, if it ran."},
            "code": {"type": "string", "description": "A stable dotted error code, such as tenancy.bad-path.slash."},
            "status": {"type": "integer"},
            "title": {"type": "string"},
            "detail": {"type": "string"},
        },
    }
    return {
        "type": "object",
        "required": ["errors"],
        "additionalProperties": False,
        "properties": {"errors": {"type": "array", "minItems": 1, "items": error}},
        "description": "The OpenStack API-WG errors guideline's body (error_format = api-wg).",
    }


def _tenant_summary() -> dict:
    time = {"type": "string", "description": "ISO 8601, UTC."}
    return {
        "type": "object",
        "required": ["id", "state", "created", "updated", "deleted", "etag"],
        "properties": {
            "id": schema_ref("TenantId"),
            "state": {"enum": ["active", "deleted"]},
            "created": time,
            "updated": time,
            "deleted": {"type": ["string", "null"]},
            "etag": {"type": "string"},
        },
    }


def _move_document() -> dict:
    state = {
        "type": "object",
        "required": ["path", "state", "tag", "deleted"],
        "properties": {
            "path": {"type": "string"},
            "state": {},
            "tag": {"type": "string"},
            "deleted": {"type": "boolean"},
        },
    }
    resources = {
        "type": "object",
        "required": ["count", "tag", "metadata"],
        "properties": {
            "count": {"type": "integer", "minimum": 0},
            "tag": {"type": "string"},
            "metadata": {},
            "list": {"type": "array", "items": state},
        },
    }
    destination = {
        "allOf": [schema_ref("TenantSummary"), {"required": ["resources"], "properties": {"resources": resources}}]
    }
    move = {
        "type": "object",
        "required": ["source", "destination"],
        "properties": {
            "source": schema_ref("TenantSummary"),
            "destination": destination,
            "resource": state,
            "resources": resources,
        },
        "oneOf": [{"required": ["resource"]}, {"required": ["resources"]}],
    }
    return {
        "type": "object",
        "required": ["move"],
        "additionalProperties": False,
        "properties": {"move": move},
        "description": "A move action document: both tenants, the destination's resources, and the resource "
        "(or all of the tenant's resources) that would move. Its ETag is what a conditional POST's If-Match names.",
    }


def header(description: str, schema: dict | None = None) -> dict:
    """An OpenAPI header object: *description* and *schema* (a string by default)."""
    return {"description": description, "schema": schema or {"type": "string"}}


def version_headers(middleware: Any) -> dict[str, dict]:
    """The version headers *middleware*'s error answers carry (its ``microversions`` option); ``{}`` without."""
    versions = getattr(middleware, "microversions", None)
    if versions is None:
        return {}
    found = {
        name: header("Under %s: the version the service would serve the request at." % versions.segment)
        for name in versions.header_names
    }
    found["Vary"] = header("Under %s: %s." % (versions.segment, ", ".join(versions.header_names)))
    return found


def version_parameters(middleware: Any) -> list[dict]:
    """The version request headers *middleware* reads (its ``microversions`` option); ``[]`` without."""
    versions = getattr(middleware, "microversions", None)
    if versions is None:
        return []
    standard = {
        "name": versions.header_names[0],
        "in": "header",
        "required": False,
        "description": "The microversion asked for: '%s X.Y' or '%s latest' (%s to %s; none: %s)."
        % (versions.service_type, versions.service_type, versions.minimum, versions.maximum, versions.minimum),
        "schema": {"type": "string"},
    }
    legacy = [
        {
            "name": name,
            "in": "header",
            "required": False,
            "description": "The service's own version header: X.Y.",
            "schema": {"type": "string"},
        }
        for name in versions.header_names[1:]
    ]
    return [standard, *legacy]


def refuse_path(operation: Operation, middleware: Any, name: str, too_long: bool) -> None:
    """Add *middleware*'s refusals of a path with no canonical form (and ``414`` when it bounds the target)."""
    fmt, headers = middleware.error_format, version_headers(middleware)
    operation.refuse(400, "tenancy.bad-path.", "a path with no canonical form (%s)." % name, fmt, headers)
    if too_long:
        operation.refuse(414, "tenancy.bad-path.", "a request target over max_target_length (%s)." % name, fmt, headers)
    for parameter in version_parameters(middleware):
        operation.parameter(parameter)


# Versions tried, in order, for a {version} segment: the first the filter's version_pattern takes.
_VERSION_SAMPLES = ("v1", "v2", "v2.1", "v1.0", "v3", "v1.1", "v10", "1", "2", "2.1", "1.0", "v1beta1", "latest")


def version_sample(middleware: Any) -> str:
    """A segment *middleware*'s ``version_pattern`` (its ``version_re``) reads as a version: ``v1`` for the default.

    A filter asked about a path made from a template (``admin_cull``'s
    judge, by :func:`tenancy_mw.openapi.cull`) must read its ``{version}``
    as a version, or its ``{version}`` rules never match.
    """
    pattern = getattr(middleware, "version_re", None)
    if pattern is None:
        return "v1"
    return next((v for v in _VERSION_SAMPLES if pattern.fullmatch(v)), "v1")
