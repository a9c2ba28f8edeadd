"""The demo's URL map: the Routes library (as nova uses it), over the canonical path.

The app never matches URLs by hand.  It hands :meth:`Router.match` the
segments of :func:`tenancy_mw.core.paths.canonical_path` (percent-decoded, dot
segments and double encodings already refused, the mount removed), so a
request reaches the handler the filters in front of it decided on, however
its path was spelled.  Routes matches a URL string, so each segment is
quoted again for it (a ``/`` inside a decoded segment cannot become a
separator) and each matched value is unquoted back.

Each route names the methods it takes; a path that some route matches with
other methods is ``405`` with their ``Allow`` list, as nova answers (its
router also connects every route with a method condition), and a path no
route matches is ``404``::

    >>> router = Router()
    >>> router.connect("/v2.1/{project_id}/servers/{server_id}", "show", ("GET", "HEAD"))
    >>> router.match(("v2.1", "acme", "servers", "a/b"), "GET")
    ('show', {'project_id': 'acme', 'server_id': 'a/b'})
    >>> router.match(("v2.1", "acme", "servers", "1"), "PUT")
    Traceback (most recent call last):
    ...
    demo_compute.router.MethodNotAllowed: PUT; allowed: GET, HEAD
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import quote, unquote

import routes

__all__ = ["METHODS", "MethodNotAllowed", "NoRoute", "Router"]

#: The methods a 405 may list in ``Allow``, in the order it lists them.
METHODS = ("DELETE", "GET", "HEAD", "PATCH", "POST", "PUT")

# The key under which a route carries its handler's name in the match.
_HANDLER = "handler"


class NoRoute(LookupError):
    """No route has this path (``404``)."""


class MethodNotAllowed(LookupError):
    """Routes have this path, but not for this method (``405``); :attr:`allow` lists theirs."""

    def __init__(self, method: str, allow: list[str]) -> None:
        super().__init__("%s; allowed: %s" % (method, ", ".join(allow)))
        #: The methods the path takes, sorted (the ``Allow`` header's value, joined by ", ").
        self.allow = allow


class Router:
    """A Routes ``Mapper`` whose routes carry a handler name and their methods."""

    def __init__(self) -> None:
        # explicit: no implicit controller/action defaults; the demo's
        # routes are only those connected here.
        self.mapper = routes.Mapper(explicit=True)

    def connect(
        self, path: str, handler: str, methods: Iterable[str], requirements: dict[str, str] | None = None
    ) -> None:
        """Route *path* (Routes syntax, ``{name}`` for a segment) to *handler* for *methods*.

        *requirements* maps a segment's name to the regular expression its
        (quoted) value must match, as Routes takes it.
        """
        self.mapper.connect(
            path, conditions={"method": list(methods)}, requirements=requirements or {}, **{_HANDLER: handler}
        )

    def match(self, segments: tuple[str, ...], method: str) -> tuple[str, dict[str, str]]:
        """``(handler, {name: decoded segment})`` of the route for *segments* and *method*.

        Raises :class:`MethodNotAllowed` or :class:`NoRoute`.
        """
        url = "/" + "/".join(quote(segment, safe="") for segment in segments)
        found = self.mapper.match(url, {"REQUEST_METHOD": method})
        if found is None:
            allow = [other for other in METHODS if self.mapper.match(url, {"REQUEST_METHOD": other}) is not None]
            if allow:
                raise MethodNotAllowed(method, allow)
            raise NoRoute(url)
        handler = found.pop(_HANDLER)
        return handler, {name: unquote(value) for name, value in found.items()}
