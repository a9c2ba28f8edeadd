"""``tag_query``: read ``tags``, ``tags-any``, ``not-tags``, ``not-tags-any`` for the wrapped service.

On every request whose method is in ``methods`` (``GET`` and ``HEAD`` by
default), the filter parses the four tag parameters of the query string
(:func:`tenancy_mw.tags.model.parse_tag_query`) and leaves the result in
``environ['tenancy.tag_query']``: a :class:`~tenancy_mw.tags.model.TagQuery` with

- ``tags``, ``tags_any``, ``not_tags``, ``not_tags_any``: frozensets of
  ``str``, what each parameter held;
- ``matches(tags)``: whether a resource with these tags passes, for a
  service that filters in Python;
- ``where(resource_id_column, tag_table)`` (with the ``sql`` extra): the
  SQLAlchemy condition for the service's own query (``EXISTS`` / ``NOT
  EXISTS``, never a join, so a ``LIMIT`` counts resources), and
  ``apply(select, resource_id_column)``.

With no tag parameter the object is still there, and matches everything.
On other methods the key is removed (nothing was parsed).

A bad parameter is answered ``400`` before the service sees the request,
with a JSON error naming the tag, the parameter and the rule
(``tenancy.invalid-tag-query.<rule>``): an empty item (``tags=``,
``tags=a,,b``), a tag over 60 bytes of UTF-8, one holding ``/``, a control
character or a percent-escape, bytes that are not UTF-8, or more tags in
all than ``max_query_tags``.  Tags are case sensitive.  A contradictory
query (``tags=blue&not-tags=blue``) is valid: it matches nothing.

A parameter given more than once is merged into one list: ``tags=a&tags=b``
is ``tags=a,b`` (openstacksdk sends a Python list that way; neutron merges
too; nova keeps only the last one).

``not_tags_semantics``
    ``guideline`` (the default) reads ``not-tags=a,b`` as NOT (a OR b) and
    ``not-tags-any=a,b`` as NOT (a AND b), as the tags spec and the API-WG
    guideline say.  **nova and neutron implement the reverse**; set
    ``nova`` for a service whose clients were written against them.

Usage in ``api-paste.ini``::

    [filter:tag_query]
    use = egg:tenancy_mw#tag_query
    not_tags_semantics = guideline

From Python::

    >>> from tenancy_mw.tags.filter import TagQueryFilter
    >>> def my_wsgi_app(environ, start_response):
    ...     start_response("200 OK", [])
    ...     return [str(environ["tenancy.tag_query"].matches({"web"})).encode()]
    >>> app = TagQueryFilter(my_wsgi_app, {"not_tags_semantics": "nova"})
    >>> from webtest import TestApp
    >>> TestApp(app).get("/v2.1/acme/servers?tags-any=web,db").text
    'True'
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from oslo_config import cfg

from tenancy_mw.core.base import TenancyMiddleware
from tenancy_mw.tags.model import MAX_QUERY_TAGS, SEMANTICS, InvalidTagQuery, parse_tag_query

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

__all__ = ["TAG_QUERY_KEY", "TagQueryFilter", "list_opts", "set_defaults"]

# The logger keeps its 0.1 name, which operators route on (doc/configuration.rst).
LOG = logging.getLogger("tenancy_mw.tag_query")

#: Where the parsed query is left for the wrapped service.
TAG_QUERY_KEY = "tenancy.tag_query"

OPTS = [
    cfg.StrOpt(
        "not_tags_semantics",
        default="guideline",
        choices=[
            ("guideline", "the spec and API-WG guideline: not-tags=a,b is NOT (a OR b), "
                          "not-tags-any=a,b is NOT (a AND b)"),
            ("nova", "nova's and neutron's reverse reading: not-tags=a,b is NOT (a AND b), "
                     "not-tags-any=a,b is NOT (a OR b)"),
        ],
        help="How not-tags and not-tags-any are read. nova and neutron implement the reverse of the "
        "guideline: choose nova only for clients that rely on their answers.",
    ),
    cfg.ListOpt(
        "methods",
        default=["GET", "HEAD"],
        help="HTTP methods whose query strings are parsed (upper case).",
    ),
    cfg.IntOpt(
        "max_query_tags",
        default=MAX_QUERY_TAGS,
        min=1,
        help="Most tags one request may name in the four parameters together; more is a 400 "
        "(each tag is a subquery in SQL).",
    ),
]


class TagQueryFilter(TenancyMiddleware):
    """WSGI filter that parses the tag query parameters; see the module documentation.

    Example::

        >>> from webtest import TestApp
        >>> def app(environ, start_response):
        ...     start_response("200 OK", [("Content-Type", "text/plain")])
        ...     return [",".join(sorted(environ["tenancy.tag_query"].tags)).encode()]
        >>> TestApp(TagQueryFilter(app, {})).get("/v2.1/acme/servers?tags=b,a").text
        'a,b'
    """

    opt_group = "tag_query"
    opts = OPTS

    def configure(self, options) -> None:
        """Check the methods and keep the values."""
        methods = set()
        for method in options.methods:
            name = method.strip()
            if not name or not name.isalpha() or not name.isupper():
                raise self.config_error("methods", options.methods, "%r is not an upper-case HTTP method" % method)
            methods.add(name)
        if options.not_tags_semantics not in SEMANTICS:  # pragma: no cover - choices already checked
            raise self.config_error("not_tags_semantics", options.not_tags_semantics, "unknown")
        self.methods = frozenset(methods)
        self.semantics = options.not_tags_semantics
        self.max_query_tags = options.max_query_tags

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") not in self.methods:
            environ.pop(TAG_QUERY_KEY, None)
            return self.application(environ, start_response)
        try:
            query = parse_tag_query(environ.get("QUERY_STRING", ""), self.semantics, self.max_query_tags)
        except InvalidTagQuery as exc:
            LOG.debug("tag_query refused %r: %s", exc.value, exc.detail)
            return self.error(environ, start_response, 400, "tenancy.invalid-tag-query." + exc.rule, exc.detail)
        environ[TAG_QUERY_KEY] = query
        return self.application(environ, start_response)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """Copies of this filter's options: the ``tenancy_mw.tag_query`` ``oslo.config.opts`` namespace."""
    return TagQueryFilter.list_opts()


def set_defaults(**defaults: Any) -> None:
    """Change this filter's defaults for the process (see :meth:`.TenancyMiddleware.set_defaults`).

    Example::

        >>> set_defaults(error_format="nova")
        >>> TagQueryFilter(None, {}).options.error_format
        'nova'
        >>> set_defaults(error_format="api-wg")
    """
    TagQueryFilter.set_defaults(**defaults)

