"""A version-routing urlmap that behaves as nova's ``nova/api/openstack/urlmap.py``.

Written here from nova's documented behaviour (not copied), and checked
once against nova's own module over the test corpus (same app, same
``SCRIPT_NAME``/``PATH_INFO`` for every request).  It extends Paste's
``URLMap``; the API version comes from, in order:

1. the path: the longest mount that prefixes the path (slashes collapsed,
   ``//`` -> ``/``), unless it is the ``/`` mount;
2. a ``version`` parameter of ``Content-Type`` (``application/json;version=2.1``):
   the mount ``/v`` + version, ``SCRIPT_NAME`` gets the mount, ``PATH_INFO``
   stays as it is;
3. a ``version`` parameter of the ``Accept`` media range that best matches
   the supported types (``application/json``,
   ``application/vnd.openstack.compute+json``);
4. the longest mount that prefixes the path, the ``/`` mount included.
"""

from __future__ import annotations

from urllib.request import parse_http_list

import paste.urlmap

SUPPORTED_TYPES = ("application/json", "application/vnd.openstack.compute+json")


def _unquote(value: str) -> str:
    if value and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def media_type_params(value: str) -> tuple[str, dict]:
    """``"application/json; q=0.8; version=2.1"`` -> ``("application/json", {"q": "0.8", "version": "2.1"})``.

    Keys keep their case; a value keeps trailing spaces (nova's parser
    does), and loses one pair of surrounding quotes.
    """
    if not value:
        return "", {}
    pieces = value.split(";")
    params = {}
    for piece in pieces[1:]:
        key, sep, val = piece.partition("=")
        key = _unquote(key.strip())
        if not key:
            continue
        params[key] = _unquote(val.lstrip()) if sep and val.strip() else None
    return _unquote(pieces[0].strip()), params


def best_accept_match(accept: str, supported) -> tuple[str | None, dict]:
    """The supported type the ``Accept`` header prefers and its media range's parameters."""
    ranges = [media_type_params(item) for item in parse_http_list(accept)]
    best = (-1.0, None, {}, "*/*")  # quality, type, params, mask
    for content_type in supported:
        for mask, params in ranges:
            try:
                quality = float(params.get("q", 1) or 1)
            except ValueError:
                continue
            if quality < best[0] or (quality == best[0] and best[3].count("*") <= mask.count("*")):
                continue
            if mask == content_type or mask == "*/*" or ("*" in mask and content_type.split("/")[0] == mask[:-2]):
                best = (quality, content_type, params, mask)
    return best[1], best[2]


class URLMap(paste.urlmap.URLMap):
    """Paste's urlmap plus nova's path, Content-Type and Accept version strategies."""

    def _longest_mount(self, path: str):
        for (domain, url), app in self.applications:
            if domain:
                continue
            if path == url or path.startswith(url + "/"):
                return app, url
        return None, None

    @staticmethod
    def _with_script_name(app, url):
        def wrapped(environ, start_response):
            environ["SCRIPT_NAME"] += url
            return app(environ, start_response)

        return wrapped

    @staticmethod
    def _mounted(app, path, url):
        def wrapped(environ, start_response):
            environ["SCRIPT_NAME"] += url
            environ["PATH_INFO"] = path[len(url) :]
            return app(environ, start_response)

        return wrapped

    def _by_version(self, version: str | None):
        if version is None:
            return None
        app, url = self._longest_mount("/v" + version)
        return self._with_script_name(app, url) if app else None

    def __call__(self, environ, start_response):
        path = self.normalize_url(environ["PATH_INFO"], False)[1]
        app = None
        if len(path.split("/")) > 1:
            mounted, url = self._longest_mount(path)
            if mounted and url:
                app = self._mounted(mounted, path, url)
        if app is None:
            app = self._by_version(media_type_params(environ.get("CONTENT_TYPE", ""))[1].get("version"))
        if app is None:
            supported = list(SUPPORTED_TYPES)
            if path == "/":
                supported.append("application/atom+xml")
            params = best_accept_match(environ.get("HTTP_ACCEPT", ""), supported)[1]
            app = self._by_version(params.get("version"))
        if app is None:
            mounted, url = self._longest_mount(path)
            if mounted:
                app = self._mounted(mounted, path, url)
        if app is None:
            return self.not_found_application(environ, start_response)
        return app(environ, start_response)
