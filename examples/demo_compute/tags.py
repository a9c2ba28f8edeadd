"""Tags on the demo's servers, from microversion 2.26 (as nova has them).

- ``/v2.1/{project_id}/servers/{id}/tags`` and ``.../tags/{tag}``: the tag
  API of :class:`tenancy_mw.tags.api.TagAPI` (list, replace, delete all; add,
  check, delete one), for the tenant's own servers only: a server of
  another tenant is ``404``, as an unknown one.
- ``tags`` in ``GET /servers/{id}`` and in every server of ``GET /servers``,
  read for a whole page in one query (:meth:`TagStore.tags_of_many`).
- ``POST /servers`` takes ``tags`` in the server, from microversion 2.52
  (nova's tags on create, which openstacksdk's ``create_server(tags=...)``
  sends): checked before the server is made, so a bad tag creates nothing.
- ``GET /servers`` honours ``tags``, ``tags-any``, ``not-tags`` and
  ``not-tags-any``: the ``tag_query`` filter of ``api-paste.ini`` parses them
  into ``environ['tenancy.tag_query']`` and the list query gets its SQL
  condition (``EXISTS`` / ``NOT EXISTS``, so a page counts servers), built
  for the page asked (``marker`` and ``limit``: :mod:`demo_compute.app`).

Below 2.26 the tag URLs are ``404`` and valid tag parameters are ignored, as
in nova (a client that does not ask for 2.26 does not know of tags); a
malformed one (``tags=a/b``) is still ``400`` at any version, from the
``tag_query`` filter in front, which knows no microversions.  The tag
table lives in the servers' database, so the filter is one SQL query; a
server's tags are removed when it is deleted.
"""

from __future__ import annotations

import functools

import microversion_parse
from webob import Request, Response

from demo_compute.storage import ServerStore
from tenancy_mw.tags.api import TagAPI
from tenancy_mw.tags.filter import TAG_QUERY_KEY
from tenancy_mw.tags.model import InvalidTag, InvalidTagQuery, TagQuery, parse_tag_query, validate_tag
from tenancy_mw.tags.store import TagStore
from tenancy_mw.tenants.path_filter import TENANT_ID_KEY

__all__ = [
    "CREATE_TAGS_MICROVERSION",
    "TAGS_MICROVERSION",
    "TAG_METHODS",
    "BadCreateTags",
    "NoTagQuery",
    "ServerTags",
]

#: The first microversion with tags (nova's 2.26).
TAGS_MICROVERSION = microversion_parse.Version(2, 26)
#: The first microversion where a server is created with its tags (nova's 2.52).
CREATE_TAGS_MICROVERSION = microversion_parse.Version(2, 52)
_MICROVERSION_KEY = "demo_compute.microversion"
#: The methods of the tag URLs (:class:`tenancy_mw.tags.api.TagAPI` serves these, at every tag URL).
TAG_METHODS = ("DELETE", "GET", "HEAD", "PUT")


class NoTagQuery(Exception):
    """A list request with tag parameters but no ``tag_query`` filter in the pipeline to parse them."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class BadCreateTags(Exception):
    """The ``tags`` of a server to create are not a list of valid, distinct tags within the limit."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class ServerTags:
    """The tag side of the demo: the tag API for servers, tags in views, tag filters in lists."""

    def __init__(self, store: ServerStore, error_format: str = "api-wg") -> None:
        self.servers = store
        self.store = TagStore(store.engine, tables=store.tag_tables)
        self.api = TagAPI(self.store, owns=self._owns, noun="server", error_format=error_format)

    def _owns(self, environ: dict, server_id: str) -> bool:
        tenant_id = environ.get(TENANT_ID_KEY)
        return tenant_id is not None and self.servers.get_server(tenant_id, server_id) is not None

    @staticmethod
    def enabled(environ: dict) -> bool:
        """Whether the request is served at a microversion with tags."""
        version = environ.get(_MICROVERSION_KEY)
        return version is not None and version >= TAGS_MICROVERSION

    def respond(self, req: Request, server_id: str, tag: str | None) -> Response | None:
        """The answer of the tag API for ``servers/{id}/tags[/{tag}]``; ``None`` below 2.26 (not found)."""
        if not self.enabled(req.environ):
            return None
        return req.get_response(functools.partial(self.api.respond, resource_id=server_id, tag=tag))

    def tags_to_create(self, environ: dict, server: dict) -> list[str]:
        """The tags a create request gives its server (``[]`` for none); :class:`BadCreateTags` if wrong.

        Below 2.52 a ``tags`` key is ignored, as any key the demo does not know.
        """
        version = environ.get(_MICROVERSION_KEY)
        if version is None or version < CREATE_TAGS_MICROVERSION or "tags" not in server:
            return []
        tags = server["tags"]
        if not isinstance(tags, list):
            raise BadCreateTags('"tags" is %r, not a list of strings.' % (tags,))
        for index, tag in enumerate(tags):
            try:
                validate_tag(tag, "at server.tags[%d]" % index)
            except InvalidTag as exc:
                raise BadCreateTags(exc.detail) from None
        if len(set(tags)) != len(tags):
            raise BadCreateTags('"tags" %r lists a tag twice; list each tag once.' % (tags,))
        if len(tags) > self.store.max_tags:
            raise BadCreateTags("%d tags given; a server has at most %d." % (len(tags), self.store.max_tags))
        return tags

    def list_query(self, environ: dict) -> TagQuery | None:
        """The tag query a server list must honour, or ``None`` (no tag filter)."""
        if not self.enabled(environ):
            return None
        query = environ.get(TAG_QUERY_KEY)
        if query is None:
            try:
                asked = parse_tag_query(environ.get("QUERY_STRING", ""))
            except InvalidTagQuery:
                asked = True
            if asked:
                # Never ignore a filter the client asked for: a list it did
                # not ask for could be acted on (deleted, say).
                raise NoTagQuery(
                    "This list has tag parameters but no tag_query filter parsed them: the tag_query filter"
                    " must run before this app (check the pipeline in api-paste.ini)."
                )
            return None
        return query if query else None

    def condition(self, query: TagQuery, id_column, *, marker: str | None = None, limit: int | None = None):
        """The SQL condition of *query* on the servers' id column: a tenant's own list, so no candidates.

        For the page after *marker* (ids ascending) of at most *limit* servers: the
        marker goes inside the tag subqueries the database joins, which then read the index from there.
        """
        return self.store.where(query, id_column, marker=marker, limit=limit)

    def add_to_views(self, environ: dict, views: list[dict]) -> None:
        """Put ``tags`` in each server view, from 2.26 (one query for all of them)."""
        if not self.enabled(environ) or not views:
            return
        found = self.store.tags_of_many([view["id"] for view in views])
        for view in views:
            view["tags"] = found[view["id"]]

    def forget(self, server_id: str) -> None:
        """Drop the tags of a deleted server."""
        self.store.forget(server_id)
