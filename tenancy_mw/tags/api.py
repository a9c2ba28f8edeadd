"""The tag API of any collection: ``/{collection}/{id}/tags`` and ``/{collection}/{id}/tags/{tag}``.

A WSGI component a service mounts next to its own resources.  It answers,
as the tags spec and the API-WG guideline say:

=======  ======================  ==============================================
Method   Path                    Answer
=======  ======================  ==============================================
GET      ``{id}/tags``           ``200 {"tags": [...]}`` (sorted)
PUT      ``{id}/tags``           body ``{"tags": [...]}``: replaces the set;
                                 ``200 {"tags": [...]}``
DELETE   ``{id}/tags``           ``204``: every tag removed
PUT      ``{id}/tags/{tag}``     ``201`` with ``Location`` when added, ``204``
                                 when already there
GET      ``{id}/tags/{tag}``     ``204`` when there, ``404`` when not (``HEAD``
                                 too, as the guideline has it)
DELETE   ``{id}/tags/{tag}``     ``204``, or ``404`` when not there
=======  ======================  ==============================================

- **The resource must be the tenant's.**  The service plugs in
  ``owns(environ, resource_id) -> bool`` (the resource exists and belongs to
  the tenant of the request, ``environ['tenancy.tenant_id']`` behind
  ``tenant_path``).  When it says no, every method answers ``404``, the same
  as for a resource that does not exist: one tenant can neither read nor
  write, nor learn of, another's tags.
  ``owns`` must compare the id exactly: the tags are stored under the id
  as given, so a lookup that ignores case or trailing spaces (a plain
  ``String`` column on MariaDB) would let the owner of ``ABC`` reach the
  tags of another tenant's ``abc``.  Use an
  :class:`~tenancy_mw.core.sql.ExactString` column or compare in Python.
- **The limit** (``max_tags`` of the :class:`~tenancy_mw.tags.store.TagStore`,
  50 by default) is checked after "already there": re-adding a tag of a
  resource at the limit is ``204``, a new one is ``400`` and changes
  nothing; a ``PUT`` of a longer list is ``400``.  Safe under concurrency
  (see :mod:`tenancy_mw.tags.store`).
- **Tags in URLs** are percent-decoded once (the canonical path form of
  :mod:`tenancy_mw.core.paths`); a tag breaking a rule of
  :func:`tenancy_mw.tags.model.validate_tag` is ``400`` naming it, whatever the
  method.
- **Bodies** are checked: JSON, an object with the one key ``tags`` holding a
  list of distinct valid tags, at most 64 KiB; anything else is ``400`` with
  a message saying what is wrong (``413`` when too large).
- Errors are JSON in the shape of :mod:`tenancy_mw.core.errors`
  (``error_format``); a database that cannot be reached is ``503``, never a
  traceback.

Mounting.  Called as a WSGI app, it routes on the path below its mount
point (``SCRIPT_NAME``): ``PATH_INFO`` must be ``/{id}/tags`` or
``/{id}/tags/{tag}``, for example under paste's urlmap at the collection
URL.  A service that routes by itself calls :meth:`TagAPI.respond` with the
resource id and tag it found::

    tag_api = TagAPI(TagStore(engine), owns=lambda environ, server_id:
                     store.get_server(environ["tenancy.tenant_id"], server_id) is not None)

    # in the service's router, for /servers/{id}/tags[/{tag}]:
    return tag_api.respond(environ, start_response, server_id, tag)   # tag None: the list
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import TYPE_CHECKING
from urllib.parse import quote

from webob import Request

from tenancy_mw.core.bodies import BodyError, read_json_body
from tenancy_mw.core.errors import Refusal, render_path_refusal, render_refusal
from tenancy_mw.core.paths import SAFE_IN_SEGMENT, PathRefused, canonical_path, shorten
from tenancy_mw.core.sql import sa
from tenancy_mw.tags.model import MAX_RESOURCE_ID_LENGTH, InvalidTag, validate_tag
from tenancy_mw.tags.store import TagLimitExceeded, TagStore

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

__all__ = ["MAX_BODY_BYTES", "TagAPI"]

# The logger keeps its 0.1 name, which operators route on (doc/configuration.rst).
LOG = logging.getLogger("tenancy_mw.tag_api")

#: Largest request body read: 50 tags of 60 bytes, JSON-escaped, fit many times.
MAX_BODY_BYTES = 64 * 1024

_LIST_ALLOW = "DELETE, GET, HEAD, PUT"
_TAG_ALLOW = "DELETE, GET, HEAD, PUT"
_EXAMPLE = '{"tags": ["red", "web"]}'
_NO_TAG = object()


class TagAPI:
    """Tag CRUD for one collection's resources; see the module documentation.

    :param store: where the tags are.
    :param owns: ``owns(environ, resource_id) -> bool``: the resource exists
        and is the requesting tenant's.
    :param error_format: ``"api-wg"`` or ``"nova"`` (:mod:`tenancy_mw.core.errors`).
    :param noun: what a resource is called in messages (``"server"``).
    """

    def __init__(self, store: TagStore, owns: Callable[[dict, str], bool], error_format: str = "api-wg",
                 noun: str = "resource") -> None:
        self.store = store
        self.owns = owns
        self.error_format = error_format
        self.noun = noun

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """Serve ``PATH_INFO`` = ``/{id}/tags`` or ``/{id}/tags/{tag}`` (below the mount point)."""
        try:
            canonical = canonical_path(environ)
        except PathRefused as exc:
            return render_path_refusal(environ, start_response, exc, error_format=self.error_format)
        below = canonical.segments[canonical.prefix_length:]
        if len(below) == 2 and below[1] == "tags" and below[0]:
            return self.respond(environ, start_response, below[0])
        if len(below) == 3 and below[1] == "tags" and below[0]:
            return self.respond(environ, start_response, below[0], below[2])
        return self._answer(environ, start_response, Refusal(
            404, "tenancy.tags.not-found", "Nothing is at %r." % shorten(str(canonical))))

    def respond(
        self, environ: WSGIEnvironment, start_response: StartResponse, resource_id: str, tag: str | None = None
    ) -> Iterable[bytes]:
        """Answer a request on the tags of *resource_id*: the list when *tag* is ``None``, else that tag."""
        try:
            return self._dispatch(environ, start_response, resource_id, _NO_TAG if tag is None else tag)
        except Refusal as refusal:
            return self._answer(environ, start_response, refusal)
        except sa.exc.DBAPIError:
            LOG.exception("tag store failed on %s %s", environ.get("REQUEST_METHOD"), environ.get("PATH_INFO"))
            return self._answer(environ, start_response, Refusal(
                503, "tenancy.tags.store-unavailable",
                "The tag store could not be reached; try again later."))

    # Internals -------------------------------------------------------------

    def _dispatch(self, environ, start_response, resource_id, tag):
        method = environ.get("REQUEST_METHOD", "GET")
        if method not in ("GET", "HEAD", "PUT", "DELETE"):
            raise Refusal(405, "tenancy.tags.method-not-allowed",
                          "Method %r is not allowed here; allowed: %s."
                          % (shorten(method), _LIST_ALLOW if tag is _NO_TAG else _TAG_ALLOW),
                          (("Allow", _LIST_ALLOW if tag is _NO_TAG else _TAG_ALLOW),))
        # An id the tag table cannot hold names no resource with tags: the
        # same 404 as any unknown resource, before the service is asked.
        if not 1 <= len(resource_id) <= MAX_RESOURCE_ID_LENGTH or not self.owns(environ, resource_id):
            raise Refusal(404, "tenancy.tags.resource-not-found",
                          "This tenant has no %s %r." % (self.noun, shorten(resource_id)))
        store = self.store
        if tag is _NO_TAG:
            if method in ("GET", "HEAD"):
                return self._json(environ, start_response, 200, {"tags": store.tags_of(resource_id)})
            if method == "PUT":
                wanted = self._tags_from_body(environ)
                try:
                    tags = store.replace_tags(resource_id, wanted)
                except TagLimitExceeded as exc:
                    raise Refusal(400, "tenancy.tags.too-many", exc.detail) from None
                return self._json(environ, start_response, 200, {"tags": tags})
            store.remove_all(resource_id)
            return self._empty(start_response, 204)
        try:
            validate_tag(tag)
        except InvalidTag as exc:
            raise Refusal(400, "tenancy.tags.invalid-tag." + exc.rule, exc.detail) from None
        if method in ("GET", "HEAD"):
            if store.has_tag(resource_id, tag):
                return self._empty(start_response, 204)
            raise self._no_tag(resource_id, tag)
        if method == "PUT":
            try:
                added = store.add_tag(resource_id, tag)
            except TagLimitExceeded as exc:
                raise Refusal(400, "tenancy.tags.too-many", exc.detail) from None
            if not added:
                return self._empty(start_response, 204)
            return self._empty(start_response, 201, [("Location", self._location(environ))])
        if store.remove_tag(resource_id, tag):
            return self._empty(start_response, 204)
        raise self._no_tag(resource_id, tag)

    def _no_tag(self, resource_id: str, tag: str) -> Refusal:
        return Refusal(404, "tenancy.tags.tag-not-found",
                       "%s %r has no tag %r." % (self.noun.capitalize(), shorten(resource_id), shorten(tag)))

    @staticmethod
    def _tags_from_body(environ: dict) -> list[str]:
        try:
            document = read_json_body(environ, MAX_BODY_BYTES, _EXAMPLE)
        except BodyError as exc:
            raise Refusal(exc.status, "tenancy.tags." + exc.rule, exc.detail) from None
        if not isinstance(document, dict) or "tags" not in document:
            raise Refusal(400, "tenancy.tags.bad-body", "The request body %s is not of the form %s."
                          % (shorten(json.dumps(document, ensure_ascii=False)), _EXAMPLE))
        extra = sorted(set(document) - {"tags"})
        if extra:
            raise Refusal(400, "tenancy.tags.bad-body", "The request body has unknown key%s %s; send only %s."
                          % ("s" if len(extra) > 1 else "", ", ".join(map(repr, extra)), _EXAMPLE))
        tags = document["tags"]
        if not isinstance(tags, list):
            raise Refusal(400, "tenancy.tags.bad-body", "\"tags\" is %s, not a list of strings; send %s."
                          % (shorten(json.dumps(tags, ensure_ascii=False)), _EXAMPLE))
        seen = set()
        for index, tag in enumerate(tags):
            try:
                validate_tag(tag, "at tags[%d]" % index)
            except InvalidTag as exc:
                raise Refusal(400, "tenancy.tags.invalid-tag." + exc.rule, exc.detail) from None
            if tag in seen:
                raise Refusal(400, "tenancy.tags.duplicate-tag",
                              "Tag %r is listed twice in \"tags\"; list each tag once." % shorten(tag))
            seen.add(tag)
        return tags

    @staticmethod
    def _location(environ: dict) -> str:
        """The absolute URL of the request's path: the tag's own URL."""
        segments = canonical_path(environ).segments
        return Request(environ).host_url + "".join("/" + quote(s, safe=SAFE_IN_SEGMENT) for s in segments)

    @staticmethod
    def _json(environ, start_response, status: int, document: dict):
        body = json.dumps(document, ensure_ascii=False).encode("utf-8")
        start_response("%d %s" % (status, HTTPStatus(status).phrase),
                       [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [b""] if environ.get("REQUEST_METHOD") == "HEAD" else [body]

    @staticmethod
    def _empty(start_response, status: int, headers: list | None = None):
        start_response("%d %s" % (status, HTTPStatus(status).phrase), [("Content-Length", "0")] + (headers or []))
        return [b""]

    def _answer(self, environ, start_response, refusal: Refusal):
        """Answer with *refusal* in this API's ``error_format``."""
        return render_refusal(environ, start_response, refusal, error_format=self.error_format)
