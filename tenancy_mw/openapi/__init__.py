"""OpenAPI 3.1 descriptions of the HTTP APIs the tenancy_mw filters add to a service.

A service that runs the filters gains calls of its own (the tenant admin
API, the moves, the tag API), request parameters and headers (the tag
query, ``X-Client-Token``/``Idempotency-Key``, the version headers) and
answers (the filters' errors in their ``error_format``, ``301``,
``Idempotent-Replayed``).  :func:`describe_pipeline` reads them from the
filters of a built pipeline, with each filter's own options, as an
OpenAPI fragment; :func:`merge` adds fragments to the service's own
document.  Pure: no WSGI machinery, no SQL (the filters are read, never
called).

Example, a pipeline of ``tenant_path`` and ``tag_query`` over a service
mounting the tag API of its servers::

    >>> from tenancy_mw.tags.filter import TagQueryFilter
    >>> from tenancy_mw.tenants.path_filter import TenantPath
    >>> def service(environ, start_response):
    ...     start_response("200 OK", [])
    ...     return [b""]
    >>> pipeline = TenantPath(TagQueryFilter(service, {}), {})
    >>> fragment = describe_pipeline(pipeline, tag_collections=("servers",), prefix="/compute")
    >>> [path for path in sorted(fragment["paths"]) if path.endswith("/servers")]  # servers is tenant-less too
    ['/compute/{version}/servers', '/compute/{version}/{tenant_id}/servers']
    >>> [p["name"] for p in fragment["paths"]["/compute/{version}/{tenant_id}/servers"]["get"]["parameters"]][2:]
    ['tags', 'tags-any', 'not-tags', 'not-tags-any']
    >>> document = merge({"openapi": OPENAPI_VERSION, "info": {"title": "Compute", "version": "2.1"}}, fragment)
    >>> document["info"]["title"], len(document["paths"])
    ('Compute', 6)

``doc/openapi.rst`` says what the fragments hold and how a service
publishes them.
"""

from __future__ import annotations

import copy
import re
from types import ModuleType
from typing import Any

from tenancy_mw.core.errors import ERROR_FORMATS
from tenancy_mw.core.paths import DEFAULT_VERSION_PATTERN
from tenancy_mw.openapi import (
    _admin_cull,
    _id_resolver,
    _idempotency,
    _tag_api,
    _tag_query,
    _tenant_admin,
    _tenant_path,
)
from tenancy_mw.openapi._build import Context, Operation, component_schemas, render, version_sample

__all__ = ["OPENAPI_VERSION", "cull", "describe_pipeline", "merge"]

#: The OpenAPI version of every fragment.
OPENAPI_VERSION = "3.1.0"

# Each filter's describer, by the filter's opt_group: operations() it answers, contribute() to the ones it passes
# on, and (id_resolver) extend() with path items and responses of its own.
_DESCRIBERS: dict[str, ModuleType] = {
    "id_resolver": _id_resolver,
    "tenant_path": _tenant_path,
    "admin_cull": _admin_cull,
    "tenant_admin": _tenant_admin,
    "idempotency": _idempotency,
    "tag_query": _tag_query,
}

# The keys of a path item that are operations (the others: parameters, description, ...).
_METHODS = frozenset({"get", "put", "post", "delete", "options", "head", "patch", "trace"})

# The most objects followed along .application (a loop is never followed twice).
_LONGEST_CHAIN = 200


def _attribute(app: Any, name: str) -> Any:
    """``getattr(app, name, None)``, also when the object's ``__getattr__`` raises something else."""
    try:
        return getattr(app, name, None)
    except Exception:  # noqa: BLE001 - any object may sit in a pipeline
        return None


def _chain(app: Any) -> tuple[list[Any], int]:
    """The tenancy_mw filters met from *app* inwards, outermost first; and the chain's length.

    Each object's wrapped app is its ``application`` (oslo.middleware's
    filters, this library's), else its ``app`` (paste's and webob's).
    """
    found, seen, depth = [], set(), 0
    while app is not None and id(app) not in seen and depth < _LONGEST_CHAIN:
        seen.add(id(app))
        if _attribute(app, "opt_group") in _DESCRIBERS and _attribute(app, "options") is not None:
            found.append((depth, app))
        app = _attribute(app, "application") or _attribute(app, "app")
        depth += 1
    return found, depth


def _context(filters: list, prefix: str, tag_collections: tuple[str, ...], tag_error_format: str) -> Context:
    """The URL layout of the chain: ``tenant_path``'s, else ``tenant_admin``'s, else the defaults."""
    by_group: dict[str, Any] = {}
    depths: dict[str, int] = {}
    for depth, middleware in filters:
        by_group.setdefault(middleware.opt_group, middleware)
        depths.setdefault(middleware.opt_group, depth)
    tenant_path = by_group.get("tenant_path")
    layout = tenant_path or by_group.get("tenant_admin")
    options = layout.options if layout is not None else None
    # What tenant_path's layout reads as a collection where a tenant could be: no tenant id there.
    collections: tuple[str, ...] = ()
    if layout is not None and layout.options.tenant_in_path == "optional":
        collections = tuple(layout.layout.collections)
    pattern = options.version_pattern if options is not None else DEFAULT_VERSION_PATTERN
    mount = [segment for segment in prefix.split("/") if segment]
    return Context(
        prefix="/" + "/".join(mount) if mount else "",
        version_pattern=pattern,
        version_in_path=not (mount and re.fullmatch(pattern, mount[-1])),
        tenant_in_path=options is None or options.tenant_in_path != "never",
        tenant_id_pattern=options.tenant_id_pattern if options is not None else None,
        tenantless_collections=collections,
        tenant_layout=options.tenant_in_path if options is not None else None,
        tag_collections=tuple(tag_collections),
        tag_error_format=tag_error_format,
        token_tenant=tenant_path is not None and tenant_path.options.token_tenant,
        tenant_path_depth=depths.get("tenant_path"),
    )


def _service_operations(
    context: Context, depth: int, filters: list, action_collections: tuple[str, ...]
) -> list[Operation]:
    """The calls of the service the filters act on: each tag collection's list (and create, when guarded), and
    each action collection's action call (``POST .../{collection}/{resource_id}/action``)."""
    guarded = any(m.opt_group == "idempotency" and "POST" in m.methods for _, m in filters)
    found = []
    for collection in context.tag_collections:
        for form in context.collection_forms(collection):
            path = form(collection)
            listing = Operation(path, "get", depth, "list", "List %s" % collection)
            listing.respond("default", "The service's own answer.")
            found.append(listing)
            if guarded:
                create = Operation(path, "post", depth, "service", "Create a resource of %s" % collection)
                create.respond("default", "The service's own answer.")
                found.append(create)
        found += _tag_api.operations(collection, depth, context)
    for collection in action_collections:
        for form in context.collection_forms(collection):
            path = form(collection, "{resource_id}", "action")
            action = Operation(path, "post", depth, "service", "Run an action on a resource of %s" % collection)
            action.respond("default", "The service's own answer.")
            found.append(action)
    return found


def describe_pipeline(
    app: Any,
    *,
    tag_collections: tuple[str, ...] | list[str] = (),
    prefix: str = "",
    tag_error_format: str = "api-wg",
    action_collections: tuple[str, ...] | list[str] = (),
) -> dict:
    """An OpenAPI fragment of what the tenancy_mw filters in *app*'s chain add to the service.

    *app* is the outermost object of a pipeline (oslo.middleware's
    ``RequestId``, or a filter); the chain is followed through each
    object's ``application`` (else its ``app``).  Each filter is described with its own
    options: the version pattern and tenant layout, ``admin_api``, the
    move provider, ``error_format``, ``microversions``, the token headers,
    the tag query's methods and semantics.

    :param tag_collections: collections (``("servers",)``) whose tag API
        the service mounts (:class:`tenancy_mw.tags.api.TagAPI`) and whose
        list takes the tag query parameters.
    :param prefix: the service's mount (``SCRIPT_NAME``), put before every path.
    :param tag_error_format: the ``error_format`` the service gives its
        :class:`~tenancy_mw.tags.api.TagAPI` (a WSGI component, not a
        filter of the chain, so it is not found there).
    :param action_collections: collections (``("servers",)``) whose
        resources take nova-style actions, ``POST
        .../{collection}/{resource_id}/action`` with a JSON body whose
        top-level key names the action: the service's own call, with what
        the filters add to it (``admin_cull``'s answers where its rules
        name action keys).
    :returns: ``{"openapi": "3.1.0", "paths": {...}, "components": {...}}``.
    """
    filters, end = _chain(app)
    if tag_error_format not in ERROR_FORMATS:
        raise ValueError("tag_error_format %r is none of %s" % (tag_error_format, ", ".join(ERROR_FORMATS)))
    context = _context(filters, prefix, tuple(tag_collections), tag_error_format)
    for depth, middleware in filters:
        context.operations += _DESCRIBERS[middleware.opt_group].operations(middleware, depth, context)
    context.operations += _service_operations(context, end, filters, tuple(action_collections))
    # Innermost first: a filter's contribution covers what the ones after it answer (Idempotent-Replayed).
    for depth, middleware in reversed(filters):
        _DESCRIBERS[middleware.opt_group].contribute(middleware, depth, context)
    for depth, middleware in filters:
        extend = getattr(_DESCRIBERS[middleware.opt_group], "extend", None)
        if extend is not None:
            extend(middleware, depth, context)
    paths: dict[str, dict] = {path: dict(item) for path, item in context.path_items.items()}
    for operation in context.operations:
        paths.setdefault(operation.path, {})[operation.method] = render(operation, context)
    components: dict[str, dict] = {"schemas": component_schemas()}
    if context.responses:
        components["responses"] = dict(sorted(context.responses.items()))
    return {
        "openapi": OPENAPI_VERSION,
        "paths": {path: paths[path] for path in sorted(paths)},
        "components": components,
    }


def merge(document: dict, *fragments: dict) -> dict:
    """A new document: *document* with the paths and components of *fragments* added.

    A call both describe (the service's list, say, which ``tag_query``
    guards) is merged, so the service's own description gains what the
    filters add:

    - parameters by name and place; one both describe takes a value that
      satisfies both schemas (the filter checks it before the service sees
      it), whether the fragment lists it on the path or on the call;
    - answers by status; one status both describe has either body (an
      ``anyOf`` of the two schemas) and each header (either value), required only where
      both require it;
    - the document's ``operationId``, ``summary``, ``description``,
      ``requestBody`` and ``tags`` are kept, and a fragment's ``default``
      answer, which only stands for "the service's own answer", is left
      out: the document describes the service's answers.

    A component both name, or another key both set, with two different
    values raises :class:`ValueError` naming it, and so does one path both
    spell with other parameter names (``/{version}/{project_id}/servers``
    and ``/{version}/{tenant_id}/servers``); the same description twice
    is fine (a service's two pipelines give the same components).  The
    fragments are OpenAPI 3.1: a *document* of another version is refused.

    Example::

        >>> own = {"openapi": "3.1.0", "paths": {"/a": {"get": {"responses": {"200": {"description": "A."}}}}}}
        >>> added = {"paths": {"/a": {"get": {"responses": {"400": {"description": "Bad tag."},
        ...                                                 "default": {"description": "The service's."}}}}}}
        >>> sorted(merge(own, added)["paths"]["/a"]["get"]["responses"])
        ['200', '400']
        >>> one, other = ({"components": {"schemas": {"Tag": schema}}} for schema in ({}, {"type": "string"}))
        >>> merge(own, one, other)
        Traceback (most recent call last):
        ...
        ValueError: components/schemas/Tag is described differently in two documents
    """
    version = document.get("openapi", OPENAPI_VERSION)
    if not str(version).startswith("3.1."):
        raise ValueError("the document is OpenAPI %s; the fragments are OpenAPI %s" % (version, OPENAPI_VERSION))
    merged = copy.deepcopy(document)
    for fragment in fragments:
        # Components first: an answer of the fragment may refer to one of them.
        for section, entries in fragment.get("components", {}).items():
            target = merged.setdefault("components", {}).setdefault(section, {})
            for name, value in entries.items():
                _add(target, name, value, "components/%s/%s" % (section, name))
        for path, item in fragment.get("paths", {}).items():
            _refuse_a_renamed_path(merged, path)
            _merge_path_item(merged, path, item)
    return merged


def _refuse_a_renamed_path(merged: dict, path: str) -> None:
    """Two paths that differ only in their parameters' names are one path (OpenAPI: invalid)."""
    template = re.sub(r"\{[^}]*\}", "{}", path)
    for other in merged.get("paths", {}):
        if other != path and re.sub(r"\{[^}]*\}", "{}", other) == template:
            raise ValueError("%s is described as %s too: name its parameters alike" % (path, other))


# The keys of an operation the service's own description keeps when a fragment describes the call too.
_SERVICE_KEYS = frozenset({"summary", "description", "operationId", "requestBody", "tags"})


def _merge_path_item(merged: dict, path: str, item: dict) -> None:
    """Add the fragment's path *item* to *merged*'s *path*."""
    target = merged.setdefault("paths", {}).setdefault(path, {})
    path_parameters = item.get("parameters", [])
    for key, value in item.items():
        if key in _METHODS:
            target[key] = _merged_operation(merged, target.get(key), value, "%s %s" % (key.upper(), path))
        elif key == "parameters":
            target[key] = _merged_parameters(merged, target.get(key, []), value)
        else:
            _add(target, key, value, "the %s of %s" % (key, path))
    # A call listing one of the fragment's path parameters overrides the path's: it must take
    # only what the fragment's takes too.
    for method in [m for m in target if m in _METHODS]:
        own = target[method].get("parameters", [])
        listed = {_key(p, merged) for p in own}
        overridden = [p for p in path_parameters if _key(p, merged) in listed]
        if overridden:
            target[method]["parameters"] = _merged_parameters(merged, own, overridden)


def _parameter(parameter: dict, document: dict) -> dict:
    """*parameter*, or the reusable parameter its ``$ref`` names in *document*'s components."""
    while "$ref" in parameter:
        parameter = document["components"]["parameters"][parameter["$ref"].rsplit("/", 1)[1]]
    return parameter


def _key(parameter: dict, document: dict) -> tuple:
    """What names a parameter: its name and where it is (``path``, ``query``, ``header``; a header's
    name in any case)."""
    parameter = _parameter(parameter, document)
    name, place = parameter.get("name"), parameter.get("in")
    return (name.lower() if place == "header" and isinstance(name, str) else name), place


def _add(target: dict, key: str, value: Any, what: str) -> None:
    """Put *value* at *key*; a different value already there is a clash named *what*."""
    if key in target and target[key] != value:
        raise ValueError("%s is described differently in two documents" % what)
    target[key] = copy.deepcopy(value)


def _merged_operation(merged: dict, own: dict | None, added: dict, what: str) -> dict:
    """The operation *own* (the document's, may be ``None``) with what the fragment's *added* lists."""
    if own is None:
        return copy.deepcopy(added)
    operation = copy.deepcopy(own)
    for key, value in added.items():
        if key == "parameters":
            operation[key] = _merged_parameters(merged, operation.get(key, []), value)
        elif key == "responses":
            answers = operation.setdefault("responses", {})
            for status, answer in value.items():
                if status == "default":
                    continue  # stands for the service's own answers, which the document describes
                answers[status] = _merged_answer(merged, answers[status], answer) if status in answers else answer
        elif key not in _SERVICE_KEYS or key not in operation:
            _add(operation, key, value, "the %s of %s" % (key, what))
    return operation


def _merged_parameters(document: dict, own: list, added: list) -> list:
    """*own* with the parameters of *added*; one both list takes what both schemas take (a ``$ref``
    of *document*'s components is read where it points)."""
    merged = copy.deepcopy(own)
    at = {_key(p, document): n for n, p in enumerate(merged)}
    for parameter in added:
        key = _key(parameter, document)
        if key not in at:
            at[key] = len(merged)
            merged.append(copy.deepcopy(parameter))
            continue
        mine, theirs = _parameter(merged[at[key]], document), _parameter(parameter, document)
        if mine != theirs:
            schemas = [x.get("schema", {}) for x in (mine, theirs)]
            combined = dict(mine, schema={"allOf": schemas} if schemas[0] != schemas[1] else schemas[0])
            combined["required"] = bool(mine.get("required") or theirs.get("required"))
            merged[at[key]] = copy.deepcopy(combined)
    return merged


def _resolved(answer: dict, document: dict) -> dict:
    """*answer*, or the reusable answer its ``$ref`` names in *document*'s components."""
    while "$ref" in answer:
        answer = document["components"]["responses"][answer["$ref"].rsplit("/", 1)[1]]
    return answer


def _header(value: dict, document: dict) -> dict:
    while "$ref" in value:
        value = document["components"]["headers"][value["$ref"].rsplit("/", 1)[1]]
    return value


def _merged_answer(merged: dict, own: dict, added: dict) -> dict:
    """One status both describe: the service may answer it or a filter: either body, either's headers."""
    own, added = _resolved(own, merged), _resolved(added, merged)
    if own == added:
        return copy.deepcopy(own)
    answer = copy.deepcopy(own)
    if added.get("description") and added["description"] != own.get("description"):
        answer["description"] = "%s Or: %s" % (own.get("description", ""), added["description"])
    content = copy.deepcopy(added.get("content", {}))
    for media, body in own.get("content", {}).items():
        theirs = content.get(media, {}).get("schema")
        mine = body.get("schema")
        content[media] = copy.deepcopy(body)
        if theirs is not None and mine is not None and theirs != mine:
            content[media]["schema"] = {"anyOf": [mine, theirs]}
    if content:
        answer["content"] = content
    mine_headers = {name.lower(): (name, _header(h, merged)) for name, h in own.get("headers", {}).items()}
    their_headers = {name.lower(): (name, _header(h, merged)) for name, h in added.get("headers", {}).items()}
    headers = {}
    for key in sorted(set(mine_headers) | set(their_headers)):
        name, value = mine_headers.get(key) or their_headers[key]
        both = key in mine_headers and key in their_headers
        required = both and mine_headers[key][1].get("required", False) and their_headers[key][1].get("required", False)
        headers[name] = dict(value, required=bool(required))
        schemas = [found[key][1].get("schema") for found in (mine_headers, their_headers)] if both else []
        if schemas and None not in schemas and schemas[0] != schemas[1]:
            headers[name]["schema"] = {"anyOf": schemas}  # the service's value or the filter's
    if headers:
        answer["headers"] = headers
    links = dict(added.get("links", {}), **own.get("links", {}))
    if links:
        answer["links"] = links
    return answer


def cull(document: dict, app: Any) -> dict:
    """A new *document* without the calls an ``admin_cull`` filter of *app*'s chain refuses.

    A public endpoint's document: describe the whole service (the
    service's own document merged with :func:`describe_pipeline`), then
    leave out what that endpoint's ``admin_cull`` answers ``404`` or
    ``403``.  Each call is judged by the filter itself, on a path made
    from its template (cull rules decide on a path's shape, not on the
    values in it; a ``{version}`` segment is read as ``v1``).  A link to a
    call left out goes too.  A call a rule culls only for some bodies (one
    naming action keys: ``POST /servers/*/action (os-migrateLive)``) is
    kept: its members' actions are part of the endpoint's API, and the
    fragment lists the cull of an admin action among its answers.

    Example::

        >>> from tenancy_mw.cull.filter import AdminCull
        >>> public = AdminCull(lambda environ, start_response: [], {"rules": "DELETE /{version}/os-services/*"})
        >>> full = {"openapi": "3.1.0", "paths": {"/{version}/os-services/{id}": {
        ...     "get": {"responses": {"200": {"description": "A service."}}},
        ...     "delete": {"responses": {"204": {"description": "Deleted."}}}}}}
        >>> sorted(cull(full, public)["paths"]["/{version}/os-services/{id}"])
        ['get']
    """
    cullers = [middleware for _, middleware in _chain(app)[0] if middleware.opt_group == "admin_cull"]
    kept = copy.deepcopy(document)
    for path, item in list(kept.get("paths", {}).items()):
        for method in [m for m in item if m in _METHODS]:
            if any(_refuses(culler, method, path) for culler in cullers):
                del item[method]
        if not any(m in item for m in _METHODS):
            del kept["paths"][path]
    kept_ids = {
        op.get("operationId") for item in kept.get("paths", {}).values() for m, op in item.items() if m in _METHODS
    }
    for item in kept.get("paths", {}).values():
        for method in [m for m in item if m in _METHODS]:
            for answer in item[method].get("responses", {}).values():
                links = answer.get("links")
                if links is None:
                    continue
                answer["links"] = {name: link for name, link in links.items() if link.get("operationId") in kept_ids}
                if not answer["links"]:
                    del answer["links"]
    return kept


def _refuses(culler: Any, method: str, path: str) -> bool:
    """Whether the ``admin_cull`` *culler* refuses *method* on a path of the template *path*.

    Judged without a body: a keyed rule (which culls only a body naming one
    of its action keys) refuses no such call.
    """
    # describe_pipeline names the version segment {version}; any other segment is a value.  The
    # version is one the culler reads as a version: its {version} rules test its own version_pattern.
    version = version_sample(culler)
    sample = re.sub(r"\{([^}]+)\}", lambda m: version if m.group(1) == "version" else "x1", path)
    environ = {
        "REQUEST_METHOD": method.upper(),
        "SCRIPT_NAME": "",
        "PATH_INFO": sample,
        "QUERY_STRING": "",
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": "http",
    }
    return culler.judge(environ) is not None
