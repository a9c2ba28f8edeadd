"""Crafted requests aimed at admin calls, and ordinary public calls.

Every admin-aimed request here is something a lenient router, proxy or
server could take for one of the tenants spec's admin calls.  A culling
filter must keep all of them from the app (cull, 404/403, or refuse, 400),
and let every public call through unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CorpusRequest:
    """One request: sent as given, byte for byte."""

    method: str
    target: str
    note: str
    headers: tuple = ()
    body: bytes = b""
    admin: bool = True


# The spec's admin calls, as clean requests.
ADMIN_CALLS = [
    ("PUT", "/v2.1/acme", "create tenant"),
    ("DELETE", "/v2.1/acme", "delete tenant"),
    ("POST", "/v2.1/acme/action/move?dest=other", "move all resources"),
    ("GET", "/v2.1/acme/action/move?dest=other", "get tenant move action"),
    ("POST", "/v2.1/acme/servers/7/action/move?dest=other", "move a resource"),
    ("GET", "/v2.1/acme/servers/7/action/move?dest=other", "get resource move action"),
    ("POST", "/v2.1/acme/action/restore", "tenant action namespace"),
    ("GET", "/v2.1/acme/action", "tenant action namespace root"),
    ("DELETE", "/v1.0/Bob's%20Tenant", "delete spec example tenant"),
    ("PUT", "/v1.0/%E2%88%91%E2%88%9E%E2%88%86%E2%88%8F", "create unicode tenant"),
    ("DELETE", "/v1.0/resel1\\sub2\\acct3", "delete backslash tenant"),
    ("PUT", "/v1.0/resel1:sub2:acct3", "create colon tenant"),
]


def _path_variants(path: str) -> list[tuple[str, str]]:
    """Rewrites of an admin path that a lenient reader still routes to it."""
    base, _, query = path.partition("?")
    q = ("?" + query) if query else ""
    segs = base.split("/")[1:]
    out = [
        (base + "/" + q, "trailing slash"),
        ("/" + base + q, "leading double slash"),
        ("/" + "//".join(segs) + q, "every slash doubled"),
        (base.upper().replace("%2", "%2").replace("%E", "%E") + q, "upper case"),
        ("/" + "/".join(s + ";p=1" for s in segs) + q, "path parameters on every segment"),
        ("http://public.example" + base + q, "absolute-form target"),
        ("/" + "/".join(_encode_first(s) for s in segs) + q, "unreserved characters percent-encoded"),
        ("/" + "/".join(_encode_first(s).lower() for s in segs) + q, "lower-case escapes"),
        (base + "/." + q, "trailing dot segment"),
        (base + "/%2e" + q, "trailing encoded dot segment"),
        ("/" + segs[0] + "/x/../" + "/".join(segs[1:]) + q, "dot-dot segment"),
        ("/" + segs[0] + "/x/%2E%2E/" + "/".join(segs[1:]) + q, "encoded dot-dot segment"),
        ("/" + segs[0] + "/x/%252E%252E/" + "/".join(segs[1:]) + q, "double-encoded dot-dot segment"),
        ("/" + segs[0] + "/./" + "/".join(segs[1:]) + q, "dot segment after version"),
        (base + "%00" + q, "NUL after path"),
        (base + "%2F" + q, "encoded slash at end"),
        (base + "%252F" + q, "double-encoded slash at end"),
        (base + ".json" + q, "format extension"),
        (base + "%20" + q, "trailing encoded space"),
        ("/compute" + base + q, "extra mount prefix"),
        (base + "/;" + q, "trailing segment of only path parameters"),
        (base + "/%20" + q, "trailing segment of only a space"),
        ("/" + segs[0] + "/;/" + "/".join(segs[1:]) + q, "segment of only a path parameter after the version"),
        ("/" + segs[0] + "/%C2%A0/" + "/".join(segs[1:]) + q, "segment of only a no-break space"),
        ("/" + "/".join(_encode_first(_encode_first(s)).replace("%", "%25", 1) for s in segs) + q,
         "letters double-encoded"),
        ("/" + "/".join(s.replace("a", "%u0061", 1) for s in segs) + q, "IIS %u escape"),
        ("/" + "/".join(s.replace("a", "%EF%BD%81", 1) for s in segs) + q, "fullwidth letter"),
        ("/" + "/".join(s.replace("i", "%C4%B1", 1) for s in segs) + q, "dotless i"),
        ("/" + "/".join(s.replace("i", "%C4%B0", 1) for s in segs) + q, "dotted capital I"),
    ]
    if len(segs) > 2:
        out.append(("/" + segs[0] + "/" + "%2F".join(segs[1:]) + q, "encoded slashes between segments"))
        out.append(("/" + segs[0] + "/" + "%252F".join(segs[1:]) + q, "double-encoded slashes between segments"))
        out.append(("/" + segs[0] + "/" + segs[1] + "/" + "\\".join(segs[2:]) + q, "backslashes between segments"))
        out.append(("/" + segs[0] + "/" + segs[1] + "/" + "%5C".join(segs[2:]) + q, "encoded backslashes"))
    return out


def _encode_first(segment: str) -> str:
    """Percent-encode the first plain letter of a segment (an unreserved character)."""
    for i, ch in enumerate(segment):
        if ch.isalpha() and ch.isascii():
            return segment[:i] + "%%%02X" % ord(ch) + segment[i + 1 :]
    return segment


def _method_variants(method: str) -> list[tuple[str, tuple, bytes, str, str]]:
    """(method, headers, body, content type, note) rewrites that still mean *method*."""
    out = [(method.lower(), (), b"", "", "lower-case method"), (method.title(), (), b"", "", "title-case method")]
    if method == "GET":
        out.append(("HEAD", (), b"", "", "HEAD for GET"))
    for header in ("X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"):
        out.append(("POST", ((header, method),), b"", "", "POST with %s" % header))
        out.append(("GET", ((header, method.lower()),), b"", "", "GET with lower-case %s" % header))
    out.append(("POST", (("X-HTTP-Method-Override", "GET, " + method),), b"", "", "override list"))
    out.append(("POST", (), b"", "?_method=" + method, "_method query parameter"))
    out.append(("POST", (), b"", "?x=1&_METHOD=" + method.lower(), "_METHOD query parameter"))
    out.append(("POST", (), b"", "?x=1;_method=" + method, "_method after a ';' query separator"))
    out.append(("POST", (), b"", "?%5Fmethod=" + method, "encoded _method query key"))
    out.append(("POST", (), b"", "?_m%65thod=" + method, "encoded letter in _method query key"))
    form = (("Content-Type", "application/x-www-form-urlencoded"),)
    out.append(("POST", form, ("_method=" + method).encode(), "", "_method form field"))
    out.append(("POST", form, ("%5Fmethod=" + method).encode(), "", "encoded _method form key"))
    out.append(("POST", form, ("a=1;_method=" + method).encode(), "", "_method form field after ';'"))
    out.append(("POST", (), ("_method=" + method).encode(), "", "_method form field, no content type"))
    out.append(("PATCH", form, ("_method=" + method).encode(), "", "PATCH with _method form field"))
    out.append(("OPTIONS", form, ("_method=" + method).encode(), "", "OPTIONS with _method form field"))
    multipart = (("Content-Type", "multipart/form-data; boundary=zz"),)
    body = ('--zz\r\nContent-Disposition: form-data; name="_method"\r\n\r\n%s\r\n--zz--\r\n' % method).encode()
    out.append(("POST", multipart, body, "", "multipart _method field"))
    out.append(("POST", multipart, body.replace(b'"_method"', b'"%5Fmethod"'), "", "multipart encoded _method name"))
    return out


def rewrites(method: str, path: str, what: str, headers: tuple = (), body: bytes = b"") -> list[CorpusRequest]:
    """*method path* as sent, then each path and method rewrite of it that still means it.

    *headers* and *body* go with every rewrite (a rewrite's own body, a form
    field say, replaces *body*; its own headers win over *headers* of the
    same name), so a call that needs them (a JSON body, a microversion) is
    still one the app would serve if it got it::

        >>> [r.target for r in rewrites("GET", "/v2.1/os-hypervisors", "list")][:2]
        ['/v2.1/os-hypervisors', '/v2.1/os-hypervisors/']
    """

    def with_base(own: tuple) -> tuple:
        names = {name.lower() for name, _ in own}
        return own + tuple((name, value) for name, value in headers if name.lower() not in names)

    found = [CorpusRequest(method, path, what, headers, body)]
    for variant, how in _path_variants(path):
        found.append(CorpusRequest(method, variant, "%s, %s" % (what, how), headers, body))
    for new_method, own_headers, own_body, query, how in _method_variants(method):
        target = path
        if query:
            target = path + ("&" + query[1:] if "?" in path else query)
        found.append(
            CorpusRequest(new_method, target, "%s, %s" % (what, how), with_base(own_headers), own_body or body)
        )
    return found


def admin_corpus() -> list[CorpusRequest]:
    """Every admin-aimed request: each admin call, each path and method rewrite."""
    corpus = []
    for method, path, what in ADMIN_CALLS:
        corpus.extend(rewrites(method, path, what))
    # Some rewrites coincide (upper-casing a path with no letters): keep one of each.
    unique = {}
    for request in corpus:
        unique.setdefault((request.method, request.target, request.headers, request.body), request)
    return list(unique.values())


@dataclass(frozen=True)
class PublicCall:
    """An ordinary call that must reach the app unchanged."""

    method: str
    target: str
    headers: tuple = field(default=())
    body: bytes = b""


PUBLIC_CALLS = [
    PublicCall("GET", "/"),
    PublicCall("GET", "/v2.1"),
    PublicCall("GET", "/v2.1/"),
    PublicCall("GET", "/healthcheck"),
    PublicCall("GET", "/v2.1/acme"),
    PublicCall("HEAD", "/v2.1/acme"),
    PublicCall("GET", "/v2.1/acme/servers"),
    PublicCall("GET", "/v2.1/acme/servers/detail?limit=10&marker=7"),
    PublicCall("GET", "http://public.example/v2.1/acme/servers?limit=1"),
    PublicCall("POST", "/v2.1/acme/servers", (("Content-Type", "application/json"),), b'{"server": {"name": "a"}}'),
    PublicCall("GET", "/v2.1/acme/servers/7"),
    PublicCall("PUT", "/v2.1/acme/servers/7", (("Content-Type", "application/json"),), b'{"server": {"name": "b"}}'),
    PublicCall("DELETE", "/v2.1/acme/servers/7"),
    PublicCall("POST", "/v2.1/acme/servers/7/action", (("Content-Type", "application/json"),), b'{"reboot": {}}'),
    PublicCall("PUT", "/v2.1/acme/servers/7/tags/move"),
    PublicCall("DELETE", "/v2.1/acme/servers/7/tags/action"),
    PublicCall("GET", "/v2.1/acme/servers?name=action/move"),
    PublicCall("GET", "/v1.0/Bob's%20Tenant/widgets"),
    PublicCall("GET", "/v1.0/%E2%88%91%E2%88%9E%E2%88%86%E2%88%8F/widgets"),
    PublicCall("DELETE", "/v1.0/resel1\\sub2\\acct3/widgets/9"),
    PublicCall("GET", "/v2.1/actions/servers"),
    PublicCall("POST", "/v2.1/acme/os-actions", (("Content-Type", "application/json"),), b"{}"),
    PublicCall("GET", "/v2.1/acme/servers/7/os-instance-actions"),
    # Version-like names deeper in the path are not versions (but see FAIL_CLOSED_CALLS).
    PublicCall("GET", "/v1/AUTH_acme/v2/photo.jpg"),
    PublicCall("DELETE", "/v1.0/acme/widgets/v2/9/x"),
    # A tenant named like a version: reads pass; PUT/DELETE on /{version}/{v3}/{name}
    # are culled (a urlmap mounting /v2.1 could route v3 as the version: fail closed).
    PublicCall("GET", "/v2.1/v3/servers"),
    PublicCall("DELETE", "/v2.1/v3/servers/7"),
    # A form that only mentions _method in a value, and one on a public path.
    PublicCall("POST", "/v2.1/acme/servers", (("Content-Type", "application/x-www-form-urlencoded"),),
               b"description=set+_method+later"),
    PublicCall("POST", "/v2.1/acme/servers", (("Content-Type", "application/x-www-form-urlencoded"),),
               b"_method=DELETE"),
    PublicCall("POST", "/v2.1/acme", (("Content-Type", "application/x-www-form-urlencoded"),),
               b"description=_method+GET"),
    # A query that is not UTF-8 once decoded, on a path that is admin for other methods.
    PublicCall("GET", "/v2.1/acme?a=%FF"),
]

# Public calls the default rules cull all the same (doc/admin_cull.rst, failing
# closed): PUT/DELETE of a path whose last two segments could be {version}/{tenant}
# below some mount (/api/v1/x/v2.1/acme).  A service with such paths replaces
# the defaults (default_rules = false) with rules of its own.
FAIL_CLOSED_CALLS = [
    PublicCall("PUT", "/v1/AUTH_acme/v2/photo.jpg"),
    PublicCall("DELETE", "/v1.0/acme/widgets/v2/9"),
    PublicCall("DELETE", "/v1.0/r\\v2/widgets"),
]

# Admin calls only once tenant_path's strip_tenant has removed the tenant
# segment: the app routes /v2.1/acme, /v2.1/acme/action/restore, ...
STRIP_ATTACKS = [
    CorpusRequest("DELETE", "/v2.1/x/acme", "delete tenant after strip"),
    CorpusRequest("PUT", "/v2.1/x/acme", "create tenant after strip"),
    CorpusRequest("POST", "/v2.1/x/acme/action/restore", "tenant action after strip"),
    CorpusRequest("GET", "/v2.1/x/acme/action", "tenant action root after strip"),
    CorpusRequest("POST", "/v2.1/;/acme/action/restore", "';' tenant then action after strip"),
    CorpusRequest("POST", "/v2.1/x/acme", "override after strip", (("X-HTTP-Method-Override", "DELETE"),)),
    # The app routes POST /v2.1/acme with a _method form field (Routes and pecan read it): the body
    # of a path that is admin for DELETE once stripped must be read (it is, in one linear pass).
    CorpusRequest("POST", "/v2.1/x/acme", "form override after strip",
                  (("Content-Type", "application/x-www-form-urlencoded"),), b"_method=DELETE"),
]


# Requests that only some routers take for admin calls (issue 6): media-type
# versions in front of a version-routing urlmap, mounts named like versions,
# child controllers found without a tenant or at any depth, dot segments a
# server resolves.  Which of them reach an admin handler is labelled by
# sending them through the real routers without the filters.

_JSON = "application/json"
_MEDIA_VERSIONS = [
    ("Accept", _JSON + ";version=2.1"),
    ("Accept", _JSON + "; Version=2.1"),
    ("Accept", _JSON + ';version="2.1"'),
    ("Accept", _JSON + ';"version"=2.1'),
    ("Accept", _JSON + ";q=0.9;version=2.1, text/html;q=0.1"),
    ("Accept", "application/vnd.openstack.compute+json;version=2.1"),
    ("Accept", "*/*;version=2.1"),
    ("Accept", _JSON + ";version=2.1/x"),
    ("Accept", _JSON + ";version=2"),
    ("Content-Type", _JSON + ";version=2.1"),
    ("Content-Type", _JSON + "; version = 2.1"),
]

_ADMIN_BELOW_VERSION = [
    ("PUT", "/acme"),
    ("DELETE", "/acme"),
    ("POST", "/acme/action/restore"),
    ("POST", "/acme/action/move?dest=b"),
    ("GET", "/acme/action"),
    ("POST", "/acme/servers/7/action/move?dest=b"),
]

_CHILD_ANYWHERE = [
    ("POST", "/v2.1/action/restore"),
    ("POST", "/v2.1/action/move?dest=b"),
    ("GET", "/v2.1/action"),
    ("POST", "/v2.1/acme/x/action/restore"),
    ("GET", "/v2.1/acme/a/b/action"),
    ("POST", "/v2.1/acme/a/b/action/restore"),
    ("POST", "/v2.1/acme/x/action/move?dest=b"),
    ("GET", "/v2.1/acme/x/action/move.json"),
    ("POST", "/v2.1/acme/x/action/restore.json"),
    ("POST", "/v2.1/acme/x/../../action/restore"),
    ("POST", "/v2.1/acme/x/../action/restore"),
    ("DELETE", "/v2.1/x/../acme"),
    ("POST", "/v2.1/acme/servers/../action/restore"),
    ("GET", "/v2.1/acme/servers/7/../../action"),
    ("POST", "/v2.1/acme?_method=DELETE"),
    ("POST", "/v2.1/acme?_method=delete"),
    ("GET", "/v2.1/acme?_method=DELETE"),
]


# Multipart bodies whose _method part webob's parser (Routes, pecan) reads, but
# whose headers are not what a line-by-line reading expects (second review of issue 6).
_MP = "multipart/form-data; boundary=zz"
HIDDEN_MULTIPART = {
    "folded disposition header": (
        _MP, b'--zz\r\nContent-Disposition: form-data;\r\n name="_method"\r\n\r\nDELETE\r\n--zz--\r\n'
    ),
    "bare CR between headers": (
        _MP,
        b'--zz\r\nContent-Type: text/plain\rContent-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n--zz--\r\n',
    ),
    "headers ended by a line of white space": (
        _MP,
        b'--zz\r\nContent-Disposition: form-data; name="_method"\r\n \r\nDELETE\r\n--zz\r\n'
        b'Content-Disposition: form-data; name="x"\r\n\r\nfoo\r\n--zz--\r\n',
    ),
    "headers ended by LF CR LF": (
        _MP,
        b'--zz\r\nContent-Disposition: form-data; name="_method"\n\r\nDELETE\r\n--zz\r\n'
        b'Content-Disposition: form-data; name="x"\r\n\r\nfoo\r\n--zz--\r\n',
    ),
    "a header line that starts like the boundary": (
        _MP,
        b'--zz\r\nContent-Disposition: form-data; name="_method"\r\n--zzx: 1\r\n\r\nDELETE\r\n--zz--\r\n',
    ),
    "a delimiter line inside the header block": (
        _MP,
        b'--zz\r\nContent-Disposition: form-data; name="_method"\r\n--zz\r\n \r\nDELETE\r\n--zz--\r\n',
    ),
    "boundary named twice": (
        "multipart/form-data; boundary=zz; boundary=yy",
        b'--yy\r\nContent-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n--yy--\r\n--zz\r\n',
    ),
    "boundary inside a quoted parameter": (
        'multipart/form-data; a="x;boundary=zz"; boundary=yy',
        b'--yy\r\nContent-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n--yy--\r\n--zz\r\n',
    ),
}


def router_corpus() -> list[CorpusRequest]:
    """Every request sent through the real routers: the admin corpus, the strip
    attacks, the router-specific attacks above and the public calls."""
    corpus = admin_corpus() + list(STRIP_ATTACKS)
    for method, path in _ADMIN_BELOW_VERSION:
        for header in _MEDIA_VERSIONS:
            corpus.append(CorpusRequest(method, path, "version from %s: %s" % header, (header,)))
        corpus.append(CorpusRequest(method, "/v1/v2.1" + path, "mount named like a version"))
        corpus.append(CorpusRequest(method, "/v1/v1/v2.1" + path, "two mounts named like versions"))
        corpus.append(CorpusRequest(method, "/compute/v2.1" + path, "unknown mount"))
    for method, path in _CHILD_ANYWHERE:
        corpus.append(CorpusRequest(method, path, "child controller anywhere"))
        corpus.append(CorpusRequest(method, "/v1" + path, "child controller anywhere, under /v1"))
    form = (("Content-Type", "application/x-www-form-urlencoded"),)
    corpus.append(CorpusRequest("POST", "/v2.1/acme", "pecan _method form", form, b"_method=delete"))
    corpus.append(CorpusRequest("POST", "/acme", "_method form, media-type version",
                                form + (("Accept", _JSON + ";version=2.1"),), b"_method=DELETE"))
    for name, (content_type, body) in sorted(HIDDEN_MULTIPART.items()):
        corpus.append(CorpusRequest("POST", "/v2.1/acme", "multipart _method, " + name,
                                    (("Content-Type", content_type),), body))
    for call in PUBLIC_CALLS:
        corpus.append(CorpusRequest(call.method, call.target, "public call", call.headers, call.body, admin=False))
    for call in PUBLIC_CALLS:
        if call.target.startswith("/v2.1/acme/servers"):
            corpus.append(CorpusRequest(call.method, "/v1" + call.target, "public call under a /v1 mount",
                                        call.headers, call.body, admin=False))
    for header in _MEDIA_VERSIONS[:2]:
        corpus.append(CorpusRequest("GET", "/acme/servers", "public call, media-type version", (header,), admin=False))
        corpus.append(CorpusRequest("POST", "/acme/servers/7/action", "public action, media-type version",
                                    (header, ("Content-Type", _JSON)), b'{"reboot": {}}', admin=False))
    unique = {}
    for request in corpus:
        unique.setdefault((request.method, request.target, request.headers, request.body), request)
    return list(unique.values())
