"""The move actions (``GET|POST .../action/move?dest=D``): one :class:`MoveRequest` parses, documents and executes.

The move action document shows both tenants (and the destination's
resource count and tag) and what moves; its ``ETag`` is what a
conditional ``POST`` (``If-Match``) checks, again, under the registry's
move lock, right before the service's :class:`~tenancy_mw.tenants.moves.MoveProvider` moves.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

from tenancy_mw.core.errors import Refusal
from tenancy_mw.core.paths import shorten
from tenancy_mw.core.sql import error_summary, sa
from tenancy_mw.tenants.admin.answers import (
    Redirect,
    RegistryDown,
    etag,
    json_bytes,
    not_allowed,
    not_found,
    parse_if_match,
    read_registry,
    redirect,
    url,
)
from tenancy_mw.tenants.ids import InvalidTenantId, validate_tenant_id
from tenancy_mw.tenants.moves import MoveProvider, MoveRefused
from tenancy_mw.tenants.registry import DELETED, Tenant

if TYPE_CHECKING:
    from tenancy_mw.tenants.admin.filter import TenantAdmin
    from tenancy_mw.tenants.admin.routes import Target

__all__ = ["MOVE_ALLOW", "MoveRequest", "check_source", "destination_of"]

# The logger keeps its 0.1 name, which operators route on (doc/configuration.rst).
LOG = logging.getLogger("tenancy_mw.tenant_admin")

#: The methods of a move URL.
MOVE_ALLOW = "GET, HEAD, POST"


def check_source(tenant_id: str, source: Tenant | None) -> None:
    """``404`` for an unknown source tenant, ``410`` for a deleted one (an :class:`.Refusal`)."""
    if source is None:
        raise not_found(tenant_id)
    if source.state == DELETED:
        raise Refusal(410, "tenancy.tenant-deleted", "Tenant %r is deleted." % shorten(tenant_id))


def destination_of(environ: dict, tenant_id: str) -> str:
    """The one valid ``dest`` of the query, not *tenant_id*; else a ``400`` :class:`.Refusal`."""
    query = environ.get("QUERY_STRING", "")
    try:
        text = query.encode("latin-1").decode("utf-8")
        pairs = parse_qsl(text, keep_blank_values=True, encoding="utf-8", errors="strict")
    except (UnicodeError, ValueError):
        raise Refusal(400, "tenancy.move-bad-query", "The query %r is not valid UTF-8." % shorten(query)) from None
    dests = [value for name, value in pairs if name == "dest"]
    if not dests:
        raise Refusal(
            400,
            "tenancy.move-missing-dest",
            "A move needs the destination tenant: ?dest=TENANT_ID (the query was %r)." % shorten(query),
        )
    if len(dests) > 1:
        raise Refusal(
            400,
            "tenancy.move-repeated-dest",
            "dest is given %d times (%s); give one destination tenant."
            % (len(dests), ", ".join(repr(shorten(d, 40)) for d in dests[:5])),
        )
    dest = dests[0]
    try:
        validate_tenant_id(dest)
    except InvalidTenantId as exc:
        raise Refusal(400, "tenancy.move-invalid-dest." + exc.rule, "dest: " + exc.detail) from None
    if dest == tenant_id:
        raise Refusal(
            400,
            "tenancy.move-same-tenant",
            "dest %r is the tenant the resources are in already; name another tenant." % shorten(dest),
        )
    return dest


def _if_match(environ: dict) -> list[str] | None:
    if "HTTP_IF_MATCH" not in environ:
        return None
    if_match = parse_if_match(environ["HTTP_IF_MATCH"])
    if if_match is None:
        raise Refusal(
            400,
            "tenancy.bad-if-match",
            'If-Match %r is not * or a list of quoted entity tags such as "abc".' % shorten(environ["HTTP_IF_MATCH"]),
        )
    return if_match


class MoveRequest:
    """One move call: its source, ``dest``, path and ``If-Match``, checked; :meth:`answer` shows or moves.

    Making one parses and checks the request, in the order the answers
    take precedence: the source tenant (``404``/``410``), the method
    (``405``), ``dest`` (``400``), ``If-Match`` (``400``); each raises an
    :class:`.Refusal`.

    :ivar path: the resource's path below the tenant segment; ``()`` moves the whole tenant.
    """

    def __init__(self, admin: TenantAdmin, environ: dict, target: Target) -> None:
        # Under an unknown or deleted tenant every request is 404 or 410, a
        # move URL too, whatever else is wrong with it (checked again under
        # the lock for a POST).
        self.admin = admin
        self.provider: MoveProvider = admin.provider  # type: ignore[assignment]  # routed here only with one
        self.environ = environ
        self.target = target
        self.tenant_id = target.tenant_id
        self.source = read_registry(lambda: admin.registry.get(self.tenant_id))
        check_source(self.tenant_id, self.source)
        self.method = environ.get("REQUEST_METHOD", "GET")
        if self.method not in ("GET", "HEAD", "POST"):
            raise not_allowed(self.method, MOVE_ALLOW)
        self.path = target.canonical.segments[target.index + 1 : -2]
        self.dest = destination_of(environ, self.tenant_id)
        self.if_match = _if_match(environ) if self.method == "POST" else None

    def answer(self, start_response: Callable) -> list[bytes]:
        """``GET``/``HEAD``: the move action document; ``POST``: the move, then ``303`` to the new home."""
        if self.method != "POST":
            return self.show(start_response)
        return redirect(self.environ, start_response, 303, self.execute())

    def show(self, start_response: Callable) -> list[bytes]:
        """Answer ``200`` with the move action document and its ``ETag``."""
        destination = read_registry(lambda: self.admin.registry.get(self.dest))
        document = self.document(self.source, destination)
        body = json_bytes(document)
        headers = [
            ("ETag", etag(document)),
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-cache"),
        ]
        start_response("200 OK", headers)
        return [b"" if self.method == "HEAD" else body]

    def execute(self) -> str:
        """Move under the registry's lock of both tenants, record the moves; the URL of the new home."""
        registry = self.admin.registry
        try:
            with registry.move_lock(self.tenant_id, self.dest) as (conn, tenants):
                self._check_precondition(self.document(tenants[self.tenant_id], tenants[self.dest]))
                recorded, location = self._move()
                registry.record_moves(conn, self.tenant_id, self.dest, recorded)
        except MoveRefused as exc:
            status = exc.status if 400 <= exc.status < 500 else 409
            raise Refusal(status, "tenancy.move-refused", exc.detail) from None
        except sa.exc.SQLAlchemyError as exc:
            LOG.error(
                "tenant_admin: move of %r to %r failed in the registry: %s",
                self.tenant_id,
                self.dest,
                error_summary(exc),
            )
            raise RegistryDown() from None
        LOG.info(
            "tenant_admin: moved %r of tenant %r to tenant %r (%d resource%s)",
            "/".join(self.path) or "*",
            self.tenant_id,
            self.dest,
            len(recorded),
            "" if len(recorded) == 1 else "s",
        )
        return location

    def _check_precondition(self, document: dict) -> None:
        tag = etag(document)
        if self.if_match is not None and "*" not in self.if_match and tag not in self.if_match:
            raise Refusal(
                412,
                "tenancy.move-precondition-failed",
                "The state of the move changed since its ETag was read (now %s); GET the move "
                "action again and check it." % tag,
                headers=(("ETag", tag),),
            )

    def _move(self) -> tuple[list, str]:
        """Have the provider move; the ``(old, new)`` path pairs to record and the new home's URL."""
        base = self.target.canonical.segments[: self.target.index] + (self.dest,)
        if self.path:
            new_path = tuple(self.provider.move_resource(self.tenant_id, self.path, self.dest))
            return [(self.path, new_path)], url(self.environ, base + new_path, False)
        pairs = self.provider.move_tenant(self.tenant_id, self.dest)
        return [(tuple(old), tuple(new)) for old, new in pairs], url(self.environ, base, False)

    def document(self, source: Tenant | None, destination: Tenant | None) -> dict:
        """The move action document, after checking both tenants and the resource; or an :class:`.Refusal`."""
        check_source(self.tenant_id, source)
        if destination is None:
            raise Refusal(
                404,
                "tenancy.move-destination-not-found",
                "The destination tenant %r does not exist; create it first." % shorten(self.dest),
            )
        if destination.state == DELETED:
            raise Refusal(
                409,
                "tenancy.move-destination-deleted",
                "The destination tenant %r is deleted; restore it first." % shorten(self.dest),
            )
        assert source is not None  # check_source refused None
        document = {"source": source.summary(), "destination": destination.summary()}
        # The destination's resources are affected too (the spec's example: a
        # tenant may hold at most 100 resources): their count and state tag,
        # never their list, are in the document and so in its ETag.
        received = self.provider.tenant_resources(self.dest, 0)
        document["destination"]["resources"] = {
            "count": received.count,
            "tag": received.tag,
            "metadata": received.metadata,
        }
        if self.path:
            document["resource"] = self._resource_document()
        else:
            document["resources"] = self._resources_document()
        return {"move": document}

    def _resource_document(self) -> dict:
        state = self.provider.resource_state(self.tenant_id, self.path)
        if state is not None and not state.deleted:
            return state.document()
        where = (shorten("/".join(self.path)), shorten(self.tenant_id))
        if self.if_match is not None:
            raise Refusal(
                412,
                "tenancy.move-precondition-failed",
                "Resource %r of tenant %r is no longer there as it was when its ETag was read." % where,
            )
        if state is not None:
            raise Refusal(410, "tenancy.move-resource-deleted", "Resource %r of tenant %r is deleted." % where)
        location = self.admin.moved_location(self.environ, self.tenant_id, ("action", "move"))
        if location:
            raise Redirect(301, location)
        raise Refusal(
            404,
            "tenancy.move-resource-not-found",
            "Tenant %r has no resource %r to move." % (shorten(self.tenant_id), shorten("/".join(self.path))),
        )

    def _resources_document(self) -> dict:
        limit = self.admin.list_limit
        resources = self.provider.tenant_resources(self.tenant_id, limit)
        document = {"count": resources.count, "tag": resources.tag, "metadata": resources.metadata}
        if resources.resources is not None and len(resources.resources) <= limit:
            document["list"] = [state.document() for state in resources.resources]
        return document
