"""What :class:`tenancy_mw.tags.api.TagAPI` answers, mounted at ``/{collection}/{id}/tags`` by the service."""

from __future__ import annotations

from tenancy_mw.openapi._build import Context, Operation, header, schema_ref

__all__ = ["ALLOW", "operations"]

#: The methods of both tag URLs (the ``Allow`` of their ``405``).
ALLOW = ("DELETE", "GET", "HEAD", "PUT")


def operations(collection: str, depth: int, context: Context) -> list[Operation]:
    """The tag calls of *collection*'s resources, answered by the service at *depth* (the end of the chain).

    Under the tenant, without it, or both, as the layout reads the collection (:meth:`Context.collection_forms`).
    """
    fmt = context.tag_error_format
    found = []
    calls = [
        (base, method) for base in context.collection_forms(collection) for method in ("get", "head", "put", "delete")
    ]
    for base, method in calls:
        found.append(
            _list_call(
                Operation(
                    base(collection, "{resource_id}", "tags"),
                    method,
                    depth,
                    "tags",
                    _LIST_SUMMARIES[method] % collection,
                ),
                fmt,
            )
        )
        found.append(
            _tag_call(
                Operation(
                    base(collection, "{resource_id}", "tags", "{tag}"),
                    method,
                    depth,
                    "tags",
                    _TAG_SUMMARIES[method] % collection,
                ),
                fmt,
            )
        )
    for operation in found:
        operation.refuse(400, "tenancy.bad-path.", "a path with no canonical form (tag API).", fmt)
        operation.refuse(404, "tenancy.tags.resource-not-found", "the tenant has no such resource.", fmt)
        operation.refuse(503, "tenancy.tags.store-unavailable", "the tag store cannot be reached.", fmt)
    return found


_LIST_SUMMARIES = {
    "get": "List the tags of a resource of %s",
    "head": "Check a resource of %s has a tag list",
    "put": "Replace the tags of a resource of %s",
    "delete": "Remove every tag of a resource of %s",
}
_TAG_SUMMARIES = {
    "get": "Check a resource of %s has a tag",
    "head": "Check a resource of %s has a tag",
    "put": "Add a tag to a resource of %s",
    "delete": "Remove a tag from a resource of %s",
}


def _list_call(operation: Operation, fmt: str) -> Operation:
    method = operation.method
    if method in ("get", "head"):
        operation.respond(200, "The resource's tags, sorted.", schema=schema_ref("TagList"))
    elif method == "put":
        operation.request_body = {
            "required": True,
            "description": "The new set of tags, each listed once (64 KiB at most).",
            "content": {"application/json": {"schema": schema_ref("TagList")}},
        }
        operation.respond(200, "The tags now, sorted.", schema=schema_ref("TagList"))
        operation.refuse(
            400,
            "tenancy.tags.",
            'a body that is not {"tags": [...]} of distinct valid tags '
            "(bad-body, invalid-tag.*, duplicate-tag), or more than the store's max_tags (too-many).",
            fmt,
        )
        operation.refuse(413, "tenancy.tags.body-too-large", "a body over 64 KiB.", fmt)
    else:
        operation.respond(204, "Every tag removed.")
    return operation


def _tag_call(operation: Operation, fmt: str) -> Operation:
    method = operation.method
    operation.refuse(400, "tenancy.tags.invalid-tag.", "the tag breaks a rule of Tag, named after the dot.", fmt)
    if method in ("get", "head"):
        operation.respond(204, "The resource has the tag.")
        operation.refuse(404, "tenancy.tags.tag-not-found", "the resource does not have the tag.", fmt)
    elif method == "put":
        operation.respond(201, "Added.", headers={"Location": header("The tag's URL.")})
        operation.respond(204, "The resource had the tag already.")
        operation.refuse(400, "tenancy.tags.too-many", "the resource has the store's max_tags tags already.", fmt)
    else:
        operation.respond(204, "Removed.")
        operation.refuse(404, "tenancy.tags.tag-not-found", "the resource does not have the tag.", fmt)
    return operation
