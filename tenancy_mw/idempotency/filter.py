"""The ``idempotency`` filter: a retried ``POST`` with the same client token runs once.

See ``doc/idempotency.rst`` for the whole story; in short:

- A request with a token (``X-Client-Token`` or ``Idempotency-Key``, see
  :mod:`~tenancy_mw.idempotency.tokens`) on a guarded method (``POST``)
  claims the token in the store, scoped to its tenant, as an in-flight
  lease; the app runs; its response is stored for ``expiration`` seconds.
- A retry with the same fingerprint gets the stored response back, byte
  for byte, with ``Idempotent-Replayed: true`` (or, with ``replay =
  current``, the stored status and the current state of the created
  resource).
- The same token with another request: ``409`` (``mismatch_status``).
  The same token while the first still runs: ``409`` with ``Retry-After``
  (or, with ``in_flight = wait``, the first one's answer once it is there).
- Requests without a token pass untouched.

A token's scope is the project of the token keystonemiddleware confirmed
(``keystone_scope``, in both URL layouts), else the tenant ``tenant_path``
found, else ``shared_scope``; a request with none is refused (``400``).

Usage in ``api-paste.ini``, after ``authtoken`` and ``tenant_path``::

    [filter:idempotency]
    use = egg:tenancy_mw#idempotency
    backend = memcached
    memcached_servers = 10.0.0.5:11211,10.0.0.6:11211
    secret = a-long-random-string-shared-by-every-worker

From Python::

    >>> from tenancy_mw.idempotency import Idempotency
    >>> def service(environ, start_response):
    ...     start_response("201 Created", [])
    ...     return [b"created"]
    >>> app = Idempotency(service, {"backend": "memory", "shared_scope": "demo"})
    >>> app.options.backend, app.options.methods
    ('memory', ['POST'])

(``doc/idempotency.rst`` shows a replay; the ``memcached`` and ``sql``
backends take ``memcached_servers`` or ``connection``, and ``secret``.)
"""

from __future__ import annotations

import io
import logging
import os
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from oslo_config import cfg

from tenancy_mw.core.base import TenancyMiddleware
from tenancy_mw.core.bodies import BodyError, read_body
from tenancy_mw.core.errors import Refusal
from tenancy_mw.core.paths import PathRefused, canonical_path, shorten
from tenancy_mw.idempotency.fingerprint import fingerprint
from tenancy_mw.idempotency.records import InvalidRecord, Record, RecordCodec
from tenancy_mw.idempotency.stores import MemcachedStore, MemoryStore, StoreError, ValueTooLarge
from tenancy_mw.idempotency.tokens import InvalidToken, parse_token
from tenancy_mw.tenants.path_filter import TENANT_ID_KEY, header_environ_key

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

__all__ = ["REPLAYED_HEADER", "Idempotency"]

LOG = logging.getLogger(__name__)

#: The header marking a replayed answer (as Stripe sends it).
REPLAYED_HEADER = "Idempotent-Replayed"

# Hop-by-hop headers (RFC 9110 7.6.1) are about one connection: never stored.
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
     "te", "trailer", "trailers", "transfer-encoding", "upgrade"}
)
# Never replayed: hop-by-hop ones and cookies (see _stored_headers).
_NOT_REPLAYED = _HOP_BY_HOP | {"set-cookie", "set-cookie2"}
# Answers that say "try again": the request did not take effect, so the
# lease is released and a retry runs the app again.
_NOT_STORED = frozenset({408, 425, 429})

OPTS = [
    cfg.StrOpt(
        "backend",
        default="memory",
        choices=[
            ("memory", "this process only: tests and development (wrong behind several worker processes)"),
            ("memcached", "memcached servers (memcached_servers); fast, not durable"),
            ("sql", "a SQL database (connection); durable, shared by every worker and host"),
        ],
        help="Where tokens are claimed and responses kept.",
    ),
    cfg.ListOpt(
        "memcached_servers",
        default=[],
        help="memcached servers as host:port, comma-separated (backend = memcached). Keys are spread over "
        "them by consistent hashing; a key's server being down is a store error.",
    ),
    cfg.StrOpt(
        "connection",
        secret=True,
        help="SQLAlchemy URL of the database (backend = sql). Create the table first with "
        "'tenancy-mw-manage db upgrade --url URL --component idempotency'.",
    ),
    cfg.IntOpt(
        "expiration",
        default=86400,
        min=1,
        help="Seconds a response is kept and replayed (24 h by default). Over 30 days is fine: memcached "
        "gets an absolute time then.",
    ),
    cfg.StrOpt(
        "replay",
        default="original",
        choices=[
            ("original", "the stored response, byte for byte, plus Idempotent-Replayed: true"),
            ("current", "the stored status with the current state of the created resource, read by a GET of "
             "its Location through the wrapped app"),
        ],
        help="What a retry with the same token and request gets.",
    ),
    cfg.StrOpt(
        "on_store_error",
        default="fail_closed",
        choices=[
            ("fail_closed", "answer 503 with Retry-After; the app is not called"),
            ("fail_open", "run the request unprotected, with a warning in the log"),
        ],
        help="What to do with a request that carries a token when the store is down, slow or returns a "
        "record that fails its signature.",
    ),
    cfg.StrOpt(
        "secret",
        secret=True,
        help="Secret that derives the store keys and signs the stored records (HMAC-SHA256). Required for "
        "the memcached and sql backends; every worker and host sharing a store needs the same one.",
    ),
    cfg.ListOpt(
        "token_headers",
        default=["X-Client-Token", "Idempotency-Key"],
        help="Request headers that carry the client token; a quoted structured-field string or a bare "
        "token. When several are sent they must agree.",
    ),
    cfg.ListOpt(
        "methods",
        default=["POST"],
        help="Methods a token guards (POST, PATCH). Requests with other methods pass untouched.",
    ),
    cfg.BoolOpt(
        "keystone_scope",
        default=True,
        help="Scope tokens by keystonemiddleware's X-Project-Id whenever X-Identity-Status is Confirmed, "
        "before any tenant of the path (environ['tenancy.tenant_id']): a path tenant that disagrees never moves "
        "the scope. Only with keystonemiddleware earlier in the pipeline: it removes client copies of those "
        "headers. false: the tenant, else shared_scope.",
    ),
    cfg.StrOpt(
        "shared_scope",
        help="Scope of tokens sent by requests with no tenant (no tenancy.tenant_id, no confirmed "
        "X-Project-Id). Unset: such requests are refused with 400.",
    ),
    cfg.IntOpt(
        "mismatch_status",
        default=409,
        choices=[409, 422],
        help="Status of a token reused with another request (422 as in the IETF draft).",
    ),
    cfg.StrOpt(
        "in_flight",
        default="conflict",
        choices=[
            ("conflict", "answer 409 with Retry-After at once"),
            ("wait", "wait up to in_flight_timeout seconds for the first request's answer"),
        ],
        help="What a retry gets while the first request with its token still runs.",
    ),
    cfg.FloatOpt("in_flight_timeout", default=10.0, min=0.0, help="Longest wait with in_flight = wait, seconds."),
    cfg.IntOpt(
        "lease_ttl",
        default=60,
        min=1,
        help="Seconds a claimed token stays in flight at most. A request running longer loses its claim, "
        "and a retry may then run again: keep it above the server's request timeout.",
    ),
    cfg.FloatOpt("store_timeout", default=2.0, min=0.01, help="Timeout of every store call, seconds."),
    cfg.IntOpt(
        "max_body_bytes",
        default=1024 * 1024,
        min=0,
        help="Largest request body read to fingerprint a request with a token; a larger one gets 413.",
    ),
    cfg.IntOpt(
        "max_stored_bytes",
        default=1_000_000,
        min=1024,
        help="Largest stored record (response body as base64 plus headers). A larger response is answered "
        "but not stored, its claim released, with a warning. Keep it below memcached's item size (-I, 1 MiB).",
    ),
    cfg.IntOpt(
        "retry_after",
        default=1,
        min=0,
        help="Retry-After seconds sent with the in-flight 409 and the store-error 503.",
    ),
    cfg.IntOpt(
        "purge_interval",
        default=300,
        min=0,
        help="backend = sql: seconds between opportunistic purges of expired rows, per process; 0 leaves it "
        "to 'tenancy-mw-manage idempotency purge'.",
    ),
]


class _Captured:
    """An app's answer, collected before anything reaches the client."""

    __slots__ = ("status", "headers", "chunks", "size", "rest", "close")

    def __init__(self) -> None:
        self.status: Any = None
        self.headers: Any = None
        self.chunks: list[bytes] = []
        self.size = 0
        self.rest: Any = None
        self.close: Any = None

    def start_response(self, status, headers, exc_info=None):
        # Nothing has reached the client yet, so an error page (exc_info)
        # may always replace an earlier status.
        self.status = status
        self.headers = list(headers)
        return self.write

    def write(self, data: bytes) -> None:
        self.chunks.append(data)
        self.size += len(data)


class _Remaining:
    """The body of an answer too large to store: what was read, then the rest, streamed."""

    def __init__(self, chunks: list[bytes], rest, close) -> None:
        self._chunks = chunks
        self._rest = rest
        self._close = close

    def __iter__(self):
        yield from self._chunks
        self._chunks = []
        yield from self._rest

    def close(self) -> None:
        if self._close is not None:
            self._close()


class Idempotency(TenancyMiddleware):
    """WSGI filter giving exactly-once ``POST`` with a client token; see the module documentation.

    Example (the memory store: one process only)::

        >>> from webtest import TestApp
        >>> made = []
        >>> def create(environ, start_response):
        ...     made.append(1)
        ...     start_response("201 Created", [("Content-Type", "text/plain")])
        ...     return [b"server %d" % len(made)]
        >>> app = TestApp(Idempotency(create, {}))
        >>> env = {"tenancy.tenant_id": "acme"}
        >>> first = app.post("/v2.1/acme/servers", headers={"X-Client-Token": "t1"}, extra_environ=env)
        >>> again = app.post("/v2.1/acme/servers", headers={"X-Client-Token": "t1"}, extra_environ=env)
        >>> again.body, again.headers["Idempotent-Replayed"], len(made)
        (b'server 1', 'true', 1)
    """

    opt_group = "idempotency"
    opts = OPTS

    def configure(self, options) -> None:
        """Check the options and open the store; a bad value raises ConfigError."""
        self.methods = frozenset(method.strip().upper() for method in options.methods if method.strip())
        if not self.methods:
            raise self.config_error("methods", options.methods, "name at least one method")
        headers = [name.strip() for name in options.token_headers if name.strip()]
        if not headers:
            raise self.config_error("token_headers", options.token_headers, "name at least one header")
        self.token_headers = tuple((header_environ_key(name), name) for name in headers)
        self.expiration = options.expiration
        self.lease_ttl = options.lease_ttl
        self.replay_current = options.replay == "current"
        self.fail_open = options.on_store_error == "fail_open"
        self.shared_scope = options.shared_scope
        self.keystone_scope = options.keystone_scope
        self.mismatch_status = options.mismatch_status
        self.wait_in_flight = options.in_flight == "wait"
        self.in_flight_timeout = options.in_flight_timeout
        self.max_body = options.max_body_bytes
        self.max_stored = options.max_stored_bytes
        self.retry_after = (("Retry-After", str(options.retry_after)),)
        self.store = self._open_store(options)
        self._check_multiprocess = self.store.name == "memory"

    def _open_store(self, options):
        backend = options.backend
        secret = options.secret
        if backend != "memory" and not secret:
            raise self.config_error(
                "secret", secret, "backend %s needs a secret shared by every process using the store" % backend
            )
        # The memory store lives and dies with this process: a random secret will do.
        self.codec = RecordCodec(secret or os.urandom(32))
        if backend == "memory":
            return MemoryStore()
        if backend == "memcached":
            try:
                return MemcachedStore(options.memcached_servers, timeout=options.store_timeout)
            except ValueError as exc:
                raise self.config_error("memcached_servers", options.memcached_servers, str(exc)) from None
        if not options.connection:
            raise self.config_error("connection", options.connection, "backend sql needs a SQLAlchemy URL")
        from tenancy_mw.idempotency.sql_store import SqlStore

        try:
            return SqlStore(options.connection, timeout=options.store_timeout, purge_interval=options.purge_interval)
        except Exception as exc:  # noqa: BLE001 - a bad URL or missing driver, named at load
            raise self.config_error("connection", "<hidden>", "%s: %s" % (type(exc).__name__, exc)) from None

    # The request -----------------------------------------------------------

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if self._check_multiprocess:
            self._check_multiprocess = False
            if environ.get("wsgi.multiprocess"):
                LOG.error(
                    "idempotency: backend = memory keeps tokens in one process, but this server runs several: "
                    "a retry landing on another worker runs again. Use backend = sql or memcached."
                )
        if environ.get("REQUEST_METHOD") not in self.methods:
            return self.application(environ, start_response)
        found = None
        for key, name in self.token_headers:
            value = environ.get(key)
            if value is not None:
                if found is not None:
                    found.append((value, name))
                else:
                    found = [(value, name)]
        if found is None:
            return self.application(environ, start_response)
        return self._guarded(environ, start_response, found)

    def _guarded(self, environ: dict, start_response: Callable, found: list):
        """A request with a client token: run it once, replay its answer, or refuse it."""
        try:
            token, header = _one_token(found)
            scope, shared = self._scope(environ)
            if scope is None:
                detail = "%s needs a tenant to scope it to, and this request has none." % header
                raise Refusal(400, "idempotency.no-tenant", detail)
            path = str(canonical_path(environ))
            body = self._read_body(environ)
        except Refusal as refusal:
            return self.answer(environ, start_response, refusal)
        except PathRefused as exc:
            return self.refuse_path(environ, start_response, exc)
        request_fp = fingerprint(
            environ["REQUEST_METHOD"], path, environ.get("QUERY_STRING", ""), body, environ.get("CONTENT_TYPE")
        )
        key = self.codec.store_key(scope, token, shared)
        named = "%s %r" % (header, shorten(token))
        return self._claim(environ, start_response, key, request_fp, body, (named, scope))

    def _claim(self, environ: dict, start_response: Callable, key: str, request_fp: str, body: bytes, who: tuple):
        """Claim *key* and run the request; or replay, refuse, or wait while another request holds it.

        *who* is (the token as the client sent it, header and value; its scope), for the messages.
        """
        named, scope = who
        deadline = time.monotonic() + self.in_flight_timeout if self.wait_in_flight else None
        delay = 0.05
        while True:
            lease = Record.lease(os.urandom(16).hex(), request_fp, time.time())
            try:
                claim = self.store.claim(key, self.codec.encode(key, lease), self.lease_ttl)
                if claim.claimed:
                    return self._first(environ, start_response, key, claim.handle, lease, body)
                record = self.codec.decode(key, claim.value)
            except StoreError as exc:
                return self._store_failed(environ, start_response, body, "claiming the token failed: %s" % exc)
            except InvalidRecord as exc:
                LOG.error(
                    "idempotency: the stored record of %s of tenant %r is not valid (%s); it is not replayed",
                    named, shorten(scope), exc,
                )
                return self._store_failed(environ, start_response, body, "the stored record is not valid")
            if record.fingerprint != request_fp:
                return self.error(
                    environ, start_response, self.mismatch_status, "idempotency.token-reused",
                    "%s was already used with a different request (method, path, query or body); "
                    "use a new token for a new request." % named,
                )
            if not record.in_flight:
                return self._replay(environ, start_response, record)
            if deadline is None or time.monotonic() >= deadline:
                return self.error(
                    environ, start_response, 409, "idempotency.in-flight",
                    "A request with %s is still being processed; retry later." % named,
                    headers=self.retry_after,
                )
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 0.5)

    def _scope(self, environ: dict) -> tuple[str | None, bool]:
        """(scope, shared): the confirmed token's project, else the tenant, else the shared scope (``shared`` True).

        The token's project comes first: a path tenant that disagrees with
        the authenticated project never moves or widens the scope, so one
        project's answer is never replayed to another, in either URL layout.
        """
        if self.keystone_scope and environ.get("HTTP_X_IDENTITY_STATUS") == "Confirmed":
            project = environ.get("HTTP_X_PROJECT_ID")
            if project:
                # keystonemiddleware's header: UTF-8 bytes as latin-1 (PEP 3333).
                return project.encode("latin-1", "replace").decode("utf-8", "replace"), False
        tenant = environ.get(TENANT_ID_KEY)
        if tenant:
            return tenant, False
        return self.shared_scope, True

    def _read_body(self, environ: dict):
        """The request body, with a fresh ``wsgi.input`` for the app; or raise a :class:`.Refusal`.

        :func:`~tenancy_mw.core.bodies.read_body` refuses what cannot be
        fingerprinted whole (its rule names the ``idempotency.`` code).
        """
        try:
            body = read_body(environ, self.max_body)
        except BodyError as exc:
            raise Refusal(exc.status, "idempotency." + exc.rule, exc.detail) from None
        if body:
            # The app reads the same bytes the fingerprint was taken of.
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
        return body

    def _store_failed(self, environ: dict, start_response: Callable, body: bytes, reason: str):
        if self.fail_open:
            LOG.warning("idempotency: %s; on_store_error = fail_open: running the request unprotected", reason)
            environ["wsgi.input"] = io.BytesIO(body)
            return self.application(environ, start_response)
        LOG.error("idempotency: %s; on_store_error = fail_closed: answering 503", reason)
        return self.error(
            environ, start_response, 503, "idempotency.store-unavailable",
            "Client tokens cannot be checked right now; retry later with the same token.",
            headers=self.retry_after,
        )

    # The first request -----------------------------------------------------

    def _first(self, environ: dict, start_response: Callable, key: str, handle, lease: Record, body: bytes):
        captured = _Captured()
        try:
            result = self.application(environ, captured.start_response)
            captured.close = getattr(result, "close", None)
            iterator = iter(result)
            for chunk in iterator:
                captured.chunks.append(chunk)
                captured.size += len(chunk)
                if captured.size > self.max_stored:
                    captured.rest = iterator
                    break
        except BaseException:
            # The app failed: nothing to store; let a retry run it again.
            self._release(key, handle)
            if captured.close is not None:
                captured.close()
            raise
        if captured.rest is None and captured.close is not None:
            captured.close()
        status_code = _status_code(captured.status)
        if captured.rest is not None:
            LOG.warning("idempotency: a response of over %d bytes is not stored (max_stored_bytes); its token is "
                        "released", self.max_stored)
            self._release(key, handle)
            start_response(captured.status, captured.headers)
            return _Remaining(captured.chunks, captured.rest, captured.close)
        if status_code >= 500 or status_code in _NOT_STORED or status_code < 200:
            self._release(key, handle)
        else:
            record = lease.done(captured.status, _stored_headers(captured.headers), b"".join(captured.chunks))
            self._complete(key, handle, record)
        start_response(captured.status, captured.headers)
        return captured.chunks

    def _complete(self, key: str, handle, record: Record) -> None:
        value = self.codec.encode(key, record)
        if len(value) > self.max_stored:
            LOG.warning("idempotency: a %d-byte record is over max_stored_bytes (%d); not stored, token released",
                        len(value), self.max_stored)
            self._release(key, handle)
            return
        try:
            if not self.store.complete(key, handle, value, self.expiration):
                LOG.warning("idempotency: a request finished after its claim expired (lease_ttl = %ds) and was "
                            "taken over; its response is not stored", self.lease_ttl)
        except ValueTooLarge as exc:
            LOG.warning("idempotency: the store refused a %d-byte record (%s); token released", len(value), exc)
            self._release(key, handle)
        except StoreError as exc:
            LOG.error("idempotency: storing a response failed (%s); a retry gets 409 until the claim expires "
                      "(lease_ttl = %ds)", exc, self.lease_ttl)

    def _release(self, key: str, handle) -> None:
        try:
            self.store.release(key, handle)
        except StoreError as exc:
            LOG.error("idempotency: releasing a token failed (%s); it frees itself after lease_ttl = %ds",
                      exc, self.lease_ttl)

    # Replays ---------------------------------------------------------------

    def _replay(self, environ: dict, start_response: Callable, record: Record):
        if self.replay_current:
            current = self._current(environ, record)
            if current is not None:
                status, headers, body = current
                start_response(status, headers + [(REPLAYED_HEADER, "true")])
                return [body]
        headers = list(record.headers)
        if _status_code(record.status) not in (204, 304) and not any(
                name.lower() == "content-length" for name, _ in headers):
            headers.append(("Content-Length", str(len(record.body))))
        headers.append((REPLAYED_HEADER, "true"))
        start_response(record.status, headers)
        return [record.body]

    def _current(self, environ: dict, record: Record):
        """(status, headers, body): the stored status with a fresh GET of the stored Location; None if none."""
        location = next((value for name, value in record.headers if name.lower() == "location"), None)
        if not location:
            return None
        target = urlsplit(location)
        script = environ.get("SCRIPT_NAME", "")
        if not target.path.startswith(script + "/"):
            return None  # not served by this app
        sub = dict(environ)
        for key, _ in self.token_headers:
            sub.pop(key, None)
        sub.pop("CONTENT_TYPE", None)
        sub.pop("REQUEST_URI", None)
        raw_path = target.path + ("?" + target.query if target.query else "")
        sub.update({
            "REQUEST_METHOD": "GET",
            "PATH_INFO": unquote(target.path[len(script):], encoding="latin-1"),
            "QUERY_STRING": target.query,
            "RAW_URI": raw_path,
            "CONTENT_LENGTH": "0",
            "wsgi.input": io.BytesIO(b""),
        })
        captured = _Captured()
        result = self.application(sub, captured.start_response)
        try:
            for chunk in result:
                captured.write(chunk)
        finally:
            if hasattr(result, "close"):
                result.close()
        # Chunks given to write() come first, as a server would send them.
        body = b"".join(captured.chunks)
        if not 200 <= _status_code(captured.status) < 300:
            # Gone or hidden since: the client learns that, not an old copy.
            return captured.status, captured.headers, body
        fresh = {"content-type", "content-length", "etag", "last-modified"}
        headers = [(name, value) for name, value in record.headers if name.lower() not in fresh]
        headers += [(name, value) for name, value in captured.headers
                    if name.lower() in fresh and name.lower() != "content-length"]
        headers.append(("Content-Length", str(len(body))))
        return record.status, headers, body


def _one_token(found: list) -> tuple[str, str]:
    """(token, header) of the client token the request names, once or in several headers; or a :class:`.Refusal`.

    *found* holds (value, header name) pairs, at least one.
    """
    token = None
    header = found[0][1]
    for value, name in found:
        try:
            parsed = parse_token(value, name)
        except InvalidToken as exc:
            raise Refusal(400, "idempotency.invalid-token." + exc.rule, exc.detail) from None
        if token is not None and parsed != token:
            raise Refusal(
                400,
                "idempotency.conflicting-tokens",
                "%s %r and %s %r name different tokens; send one." % (header, shorten(token), name, shorten(parsed)),
            )
        if token is None:
            token, header = parsed, name
    assert token is not None  # found is never empty
    return token, header


def _stored_headers(headers: list) -> list:
    """The response headers worth replaying: not hop-by-hop, not named in ``Connection``, no cookie.

    ``Set-Cookie`` is a credential for the client that made the first
    request; a replay may go to another client of the same tenant.
    """
    dropped = set(_NOT_REPLAYED)
    for name, value in headers:
        if name.lower() == "connection":
            dropped.update(option.strip().lower() for option in value.split(","))
    return [(name, value) for name, value in headers if name.lower() not in dropped]


def _status_code(status: str | None) -> int:
    try:
        return int(str(status).split(None, 1)[0])
    except (ValueError, IndexError):
        return 500

