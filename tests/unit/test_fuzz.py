"""Fuzzing raw requests through the filters: no exception, no 500, bounded work.

Hypothesis builds requests from the pieces attacks are made of (escapes,
dot segments, backslashes, long runs, non-UTF-8 bytes, characters a
conforming server never puts in an environ, method overrides, media-type
versions, form bodies) and environs the way gunicorn (``RAW_URI``),
waitress/uWSGI (``REQUEST_URI``) or a server without a raw target builds
them.  Each request goes through every documented pipeline.  The work a
request costs is bounded by counting the Python function calls made while
it is judged (a count, not a time: it does not depend on the machine).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tenancy_mw.cull.filter import AdminCull
from tenancy_mw.tenants.path_filter import TenantPath
from tests.support.apps import Recorder
from tests.support.wsgi import make_environ, python_calls

#: The most function calls (Python and built-in) one request may cost the
#: filters: a public request makes about two hundred; decoding an 8 KiB
#: target of escapes (the longest judged) a few thousand.  Generous on
#: purpose: it catches work that grows faster than the request, not noise.
MAX_CALLS = 20000

PIECES = [
    "v2.1", "v1", "v1.0", "acme", "action", "move", "restore", "servers", "7", "x", ".", "..", "%2e%2E",
    "%2F", "%252F", "%25", "%", "%4", "%zz", "%00", "%0A", "%C3%A1", "%FF", "%E2%88%91", "%EF%BD%81ction",
    "\\", "%5C", ";", ";p=1", " ", "%20", "A", "ACTION", "Move.json", "_method", "?", "&", "=", "#",
    "\u0100", "\ud800", "\udcff", "\u2211",
]  # fmt: skip

STACKS = {
    "admin_cull": lambda app: AdminCull(app, {}),
    "tenant_path": lambda app: TenantPath(app, {}),
    "tenant_path admin_cull": lambda app: TenantPath(AdminCull(app, {}), {}),
    "admin_cull stripping tenant_path": lambda app: AdminCull(TenantPath(app, {"strip_tenant": "true"}), {}),
    "stripping tenant_path admin_cull": lambda app: TenantPath(AdminCull(app, {}), {"strip_tenant": "true"}),
    "refuse": lambda app: AdminCull(app, {"method_override": "refuse"}),
}


@st.composite
def raw_requests(draw):
    pieces = draw(st.lists(st.sampled_from(PIECES), min_size=0, max_size=12))
    seps = draw(st.lists(st.sampled_from(["/", "/", "/", "//", ""]), min_size=len(pieces), max_size=len(pieces)))
    path = "".join(sep + piece for sep, piece in zip(seps, pieces, strict=True)) or "/"
    if draw(st.integers(0, 5)) == 0:
        path = path + draw(st.sampled_from(["/a", "\\action\\move", "%C3%A1", "/v1", ";a"])) * draw(
            st.integers(100, 3000)
        )
    if not path.startswith("/") and draw(st.booleans()):
        path = "/" + path
    if draw(st.integers(0, 6)) == 0:
        path = "http://h.example" + path
    method = draw(st.sampled_from(["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "get", "M-SEARCH"]))
    headers = []
    for name, values in (
        ("X-HTTP-Method-Override", ["DELETE", "put", "GET, DELETE", ""]),
        ("Accept", ["application/json;version=2.1", "*/*;Version=\"2.1\"", ";version=" * 20, "a;version=1/x"]),
        ("Content-Type", ["application/x-www-form-urlencoded", "multipart/form-data; boundary=zz",
                          "application/json;version=2.1", "multipart/form-data"]),
        ("X-Tenant-Id", ["victim"]),
    ):  # fmt: skip
        if draw(st.integers(0, 3)) == 0:
            headers.append((name, draw(st.sampled_from(values))))
    body = draw(
        st.sampled_from(
            [
                b"",
                b"_method=DELETE",
                b"a&" * 5000,
                b"%5Fmethod=put;a",
                b'--zz\r\nContent-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n--zz--\r\n',
                b'--zz\r\nContent-Disposition: form-data; name="_method"\r\n',
                b"_method=" * 100,
                b"\xff\xfe_method=\x00",
            ]
        )
    )
    raw_key = draw(st.sampled_from(["RAW_URI", "REQUEST_URI", None]))
    return method, path, tuple(headers), body, raw_key


@settings(max_examples=300)
@given(raw_requests(), st.sampled_from(sorted(STACKS)))
def test_any_raw_request_is_answered_without_500_and_with_bounded_work(request, stack):
    method, path, headers, body, raw_key = request
    try:
        environ = make_environ(method, path, headers, body, raw_key=raw_key)
    except (UnicodeEncodeError, ValueError):
        # A target no server would build an environ for this way: build one as a broken server would.
        environ = make_environ(method, "/", headers, body, raw_key=None)
        environ["PATH_INFO"] = path
        if raw_key:
            environ[raw_key] = path
    recorder = Recorder()
    status, calls = python_calls(STACKS[stack](recorder), environ)
    assert status != 500
    assert 200 <= status < 600
    assert calls < MAX_CALLS, (calls, method, path[:200])
    if status == 200 and recorder.seen:
        seen = recorder.seen[0]
        # The client's tenant header never reaches the app in any spelling it sent.
        if "tenant_path" in stack:
            assert seen.get("HTTP_X_TENANT_ID") in (None, seen.get("tenancy.tenant_id", "").encode().decode("latin-1"))
