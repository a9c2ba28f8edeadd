"""``os-services`` and ``os-hypervisors`` of the demo, across its two cells, as nova serves them.

==========  ==============================================  ==================================================
Method      Path (after ``/v2.1`` or ``/v2.1/{project}``)   Answer
==========  ==============================================  ==================================================
GET         ``/os-services``                                ``{"services": [...]}``; ``?host=``, ``?binary=``
PUT         ``/os-services/{id}`` (2.53 and later)          ``{"service": {...}}``; body ``{"status":
                                                            "disabled", "disabled_reason": "...",
                                                            "forced_down": false}``
PUT         ``/os-services/{action}`` (below 2.53)          ``enable``, ``disable``, ``disable-log-reason``,
                                                            ``force-down``; body ``{"host", "binary", ...}``
DELETE      ``/os-services/{id}``                           ``204``
GET         ``/os-hypervisors``                             ``{"hypervisors": [...]}``; from 2.53
                                                            ``?hypervisor_hostname_pattern=`` (see below)
GET         ``/os-hypervisors/detail``                      the same, with details
GET         ``/os-hypervisors/{id}``                        ``{"hypervisor": {...}}``
GET         ``/os-hypervisors/{id}/uptime``                 ``{"hypervisor": {..., "uptime": "..."}}``
GET         ``/os-hypervisors/{pattern}/search``            below 2.53 only: the hypervisors whose hostname
                                                            contains *pattern*
==========  ==============================================  ==================================================

Ids are integers below microversion 2.53 and uuids from 2.53 on, in answers
and in URLs.

A cell that does not answer within ``cell_timeout`` is left out of the
lists, and makes ``503`` (``demo.cells-unavailable``, with ``Retry-After``)
an answer that rests on it; see :mod:`demo_compute.cells` for the rules
and how they compare with nova's.  The ``id_resolver`` filter finds the record an id in a URL
names and hands this module ``environ['tenancy.cell']`` and
``environ['tenancy.resource_id']``; it answers ``400`` for an integer id two
cells share, ``404`` for an unknown one and ``503`` when a cell did not
answer.  This module never looks an id up itself, and refuses (``400``) an
id request that reaches it without the filter's answer.

The hostname search
    The uuids spec names the 2.53 query parameter ``hypervisor_hostname``;
    nova shipped ``hypervisor_hostname_pattern``, which python-novaclient,
    openstackclient and openstacksdk send.  Both are accepted, as a
    substring of the hypervisor hostname (as nova matches); giving both
    with different values is ``400``.  No match is ``404``, as in nova.
"""

from __future__ import annotations

import json
import math
from datetime import datetime

from microversion_parse import Version

from demo_compute.cells import DemoCells
from tenancy_mw.cells.filter import CELL_KEY, RESOURCE_ID_KEY, RESOURCE_TABLE_KEY
from tenancy_mw.cells.outcomes import CellsUnavailable
from tenancy_mw.core.paths import shorten

__all__ = ["ApiError", "CellsApi", "UUID_VERSION"]

#: The microversion from which ids are uuids.
UUID_VERSION = Version(2, 53)

_LEGACY_ACTIONS = ("enable", "disable", "disable-log-reason", "force-down")
_MAX_BODY_BYTES = 64 * 1024
_MAX_REASON = 255


class ApiError(Exception):
    """An error answer of the demo: status, stable code, a sentence naming the value, extra headers.

    Raised from deep in a handler; :class:`demo_compute.app.DemoCompute` renders it.
    """

    def __init__(self, status: int, code: str, detail: str, headers: tuple = ()) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.headers = headers


def _stamp(value: datetime | None) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%S.000000") if value is not None else None


class CellsApi:
    """The handlers, one method per route of :attr:`ROUTES`; each returns ``(status, document or None)``.

    :param cells: the demo's cell databases.
    """

    def __init__(self, cells: DemoCells) -> None:
        self.cells = cells
        # As the id_resolver filter's 503: try again once the cells had their time.
        self._retry_after = str(max(1, math.ceil(cells.lookup.cell_timeout)))

    def handle(self, handler: str, req, version: Version, **args: str) -> tuple[int, dict | None]:
        """Run the route's *handler* method; a cell that did not answer in time is ``503`` with ``Retry-After``."""
        try:
            return getattr(self, handler)(req, version, **args)
        except CellsUnavailable as exc:
            raise self.unavailable(exc.cells) from None

    def unavailable(self, cells: list[str]) -> ApiError:
        """The ``503`` of an answer that rests on *cells*, which did not answer in time."""
        return ApiError(
            503,
            "demo.cells-unavailable",
            "%d cell database%s did not answer in time. Try again later." % (len(cells), "s" if len(cells) > 1 else ""),
            (("Retry-After", self._retry_after),),
        )

    #: ``(path after the version or project segment, handler method, methods)`` of each route;
    #: the app connects them under ``/v2.1`` and ``/v2.1/{project_id}``.  The more
    #: specific paths come first (``detail`` is not a hypervisor id).
    ROUTES = (
        ("/os-services", "service_list", ("GET", "HEAD")),
        ("/os-services/{service_id}", "service_update", ("PUT",)),
        ("/os-services/{service_id}", "service_delete", ("DELETE",)),
        ("/os-hypervisors", "hypervisor_list", ("GET", "HEAD")),
        ("/os-hypervisors/detail", "hypervisor_list_detail", ("GET", "HEAD")),
        ("/os-hypervisors/{hypervisor_id}", "hypervisor_show", ("GET", "HEAD")),
        ("/os-hypervisors/{hypervisor_id}/uptime", "hypervisor_uptime", ("GET", "HEAD")),
        ("/os-hypervisors/{pattern}/search", "hypervisor_search", ("GET", "HEAD")),
    )

    # os-services, by route ---------------------------------------------------------------------

    def service_list(self, req, version: Version) -> tuple[int, dict | None]:
        """``GET /os-services`` (``?host=``, ``?binary=``)."""
        return 200, {"services": self._service_list(req, version >= UUID_VERSION)}

    def service_update(self, req, version: Version, service_id: str) -> tuple[int, dict | None]:
        """``PUT /os-services/{id}`` from 2.53; below it, nova's ``PUT /os-services/{action}``."""
        uuids = version >= UUID_VERSION
        if service_id in _LEGACY_ACTIONS:
            if not uuids:
                return 200, {"service": self._legacy_action(req, service_id)}
            # The filter passes these words on; as a uuid they are not valid.
            raise ApiError(400, "demo.invalid-id", "Invalid uuid %r." % service_id)
        if not uuids:
            raise ApiError(404, "demo.unknown-action", "Unknown action %r." % shorten(service_id))
        cell, ident = self._resolved(req, service_id, "services")
        return 200, {"service": self._update(req, cell, ident, uuids)}

    def service_delete(self, req, version: Version, service_id: str) -> tuple[int, dict | None]:
        """``DELETE /os-services/{id}``: ``204``."""
        if service_id in _LEGACY_ACTIONS:
            raise ApiError(
                400, "demo.invalid-id", "Invalid %s %r." % ("uuid" if version >= UUID_VERSION else "id", service_id)
            )
        cell, ident = self._resolved(req, service_id, "services")
        if not self.cells.delete_service(cell, ident):
            raise self._gone("service", service_id)
        return 204, None

    # os-hypervisors, by route ------------------------------------------------------------------

    def hypervisor_list(self, req, version: Version) -> tuple[int, dict | None]:
        """``GET /os-hypervisors`` (from 2.53 ``?hypervisor_hostname_pattern=``)."""
        return 200, {"hypervisors": self._hypervisor_list(req, version >= UUID_VERSION, detail=False)}

    def hypervisor_list_detail(self, req, version: Version) -> tuple[int, dict | None]:
        """``GET /os-hypervisors/detail``."""
        return 200, {"hypervisors": self._hypervisor_list(req, version >= UUID_VERSION, detail=True)}

    def hypervisor_show(self, req, version: Version, hypervisor_id: str) -> tuple[int, dict | None]:
        """``GET /os-hypervisors/{id}``."""
        return 200, {"hypervisor": self._hypervisor(req, version, hypervisor_id, detail=True)}

    def hypervisor_uptime(self, req, version: Version, hypervisor_id: str) -> tuple[int, dict | None]:
        """``GET /os-hypervisors/{id}/uptime``."""
        view = self._hypervisor(req, version, hypervisor_id, detail=False)
        view["uptime"] = " 08:32:11 up 93 days, 18:25, 12 users,  load average: 0.20, 0.12, 0.14"
        return 200, {"hypervisor": view}

    def hypervisor_search(self, req, version: Version, pattern: str) -> tuple[int, dict | None]:
        """``GET /os-hypervisors/{pattern}/search``: below 2.53 only (nova removed it there)."""
        if version >= UUID_VERSION:
            raise ApiError(404, "demo.not-found", "Nothing is at %r." % shorten("/os-hypervisors/%s/search" % pattern))
        return 200, {"hypervisors": self._matching(pattern, False, detail=False)}

    def _hypervisor(self, req, version: Version, segment: str, detail: bool) -> dict:
        cell, ident = self._resolved(req, segment, "compute_nodes")
        node = self.cells.node(cell, ident)
        if node is None:
            raise self._gone("hypervisor", segment)
        service = self.cells.compute_service(cell, node["host"])
        return self._hypervisor_view(node, service, version >= UUID_VERSION, detail=detail)

    # Shared ------------------------------------------------------------------------------------

    @staticmethod
    def _resolved(req, segment: str, table: str) -> tuple[str, int]:
        cell = req.environ.get(CELL_KEY)
        if cell is None or req.environ.get(RESOURCE_TABLE_KEY) != table:
            raise ApiError(
                400,
                "demo.unresolved-id",
                "Id %r was not resolved to a %s record: the id_resolver filter must run before this app, with "
                "this route in its resources (check api-paste.ini)." % (shorten(segment), table),
            )
        return cell, req.environ[RESOURCE_ID_KEY]

    @staticmethod
    def _gone(kind: str, segment: str) -> ApiError:
        # Deleted between the filter's lookup and now.
        return ApiError(404, "demo.not-found", "No %s has id %r." % (kind, shorten(segment)))

    @staticmethod
    def _body(req, example: str) -> dict:
        if req.content_length is not None and req.content_length > _MAX_BODY_BYTES:
            raise ApiError(413, "demo.body-too-large", "The request body is over %d bytes." % _MAX_BODY_BYTES)
        raw = req.body_file.read(_MAX_BODY_BYTES + 1)
        if len(raw) > _MAX_BODY_BYTES:
            raise ApiError(413, "demo.body-too-large", "The request body is over %d bytes." % _MAX_BODY_BYTES)
        try:
            document = json.loads(raw)
        except (ValueError, RecursionError):
            raise ApiError(
                400, "demo.bad-json", "The request body %r is not JSON; send %s." % (shorten(repr(raw)), example)
            ) from None
        if not isinstance(document, dict):
            raise ApiError(400, "demo.bad-body", "The request body must be a JSON object such as %s." % example)
        return document

    # os-services --------------------------------------------------------------------------------

    @staticmethod
    def _service_view(service: dict, uuids: bool) -> dict:
        return {
            "id": service["uuid"] if uuids else service["id"],
            "binary": service["binary"],
            "host": service["host"],
            "zone": service["zone"],
            "status": "disabled" if service["disabled"] else "enabled",
            "state": "down" if service["forced_down"] else "up",
            "updated_at": _stamp(service["updated_at"]),
            "disabled_reason": service["disabled_reason"],
            "forced_down": bool(service["forced_down"]),
        }

    def _service_list(self, req, uuids: bool) -> list[dict]:
        host, binary = req.GET.get("host"), req.GET.get("binary")
        services, _ = self.cells.services(host, binary)
        return [self._service_view(service, uuids) for _, service in services]

    def _update(self, req, cell: str, ident: int, uuids: bool) -> dict:
        example = '{"status": "disabled", "disabled_reason": "maintenance"}'
        body = self._body(req, example)
        unknown = sorted(set(body) - {"status", "disabled_reason", "forced_down"})
        if unknown:
            raise ApiError(400, "demo.bad-body", "Unknown field(s) %s; send %s." % (", ".join(unknown), example))
        if "status" not in body and "forced_down" not in body:
            raise ApiError(400, "demo.bad-body", "Give status and/or forced_down; for example %s." % example)
        changes = {}
        if "status" in body:
            if body["status"] not in ("enabled", "disabled"):
                raise ApiError(
                    400,
                    "demo.bad-status",
                    "status %r is neither 'enabled' nor 'disabled'." % shorten(repr(body["status"])),
                )
            changes["disabled"] = body["status"] == "disabled"
            changes["disabled_reason"] = None
        if "disabled_reason" in body:
            reason = body["disabled_reason"]
            if body.get("status") != "disabled":
                raise ApiError(400, "demo.bad-body", "disabled_reason goes only with status 'disabled'.")
            if not isinstance(reason, str) or not reason.strip() or len(reason) > _MAX_REASON:
                raise ApiError(
                    400,
                    "demo.bad-reason",
                    "disabled_reason must be 1 to %d characters, not %s." % (_MAX_REASON, shorten(repr(reason))),
                )
            changes["disabled_reason"] = reason
        if "forced_down" in body:
            if not isinstance(body["forced_down"], bool):
                raise ApiError(400, "demo.bad-forced-down", "forced_down must be true or false.")
            changes["forced_down"] = body["forced_down"]
        service = self.cells.update_service(cell, ident, changes)
        if service is None:
            raise self._gone("service", str(ident))
        return self._service_view(service, uuids)

    def _legacy_action(self, req, action: str) -> dict:
        example = '{"host": "compute1", "binary": "nova-compute"}'
        body = self._body(req, example)
        host, binary = body.get("host"), body.get("binary")
        if not isinstance(host, str) or not isinstance(binary, str):
            raise ApiError(400, "demo.bad-body", "Give the service's host and binary, as in %s." % example)
        found, unanswered = self.cells.services(host, binary)
        if unanswered:
            # The service may be in a cell that did not answer, or be there too (ambiguous).
            raise self.unavailable(unanswered)
        if not found:
            raise ApiError(404, "demo.not-found", "No service %s on host %s." % (shorten(binary), shorten(host)))
        if len(found) > 1:
            raise ApiError(
                400,
                "demo.ambiguous-host",
                "Host %s has service %s in several cells." % (shorten(host), shorten(binary)),
            )
        cell, service = found[0]
        if action == "force-down":
            if not isinstance(body.get("forced_down"), bool):
                raise ApiError(400, "demo.bad-forced-down", "forced_down must be true or false.")
            self.cells.update_service(cell, service["id"], {"forced_down": body["forced_down"]})
            return {"host": host, "binary": binary, "forced_down": body["forced_down"]}
        changes = {"disabled": action != "enable", "disabled_reason": None}
        view = {"host": host, "binary": binary, "status": "enabled" if action == "enable" else "disabled"}
        if action == "disable-log-reason":
            reason = body.get("disabled_reason")
            if not isinstance(reason, str) or not reason.strip() or len(reason) > _MAX_REASON:
                raise ApiError(400, "demo.bad-reason", "disabled_reason must be 1 to %d characters." % _MAX_REASON)
            changes["disabled_reason"] = view["disabled_reason"] = reason
        self.cells.update_service(cell, service["id"], changes)
        return view

    # os-hypervisors -----------------------------------------------------------------------------

    @staticmethod
    def _hypervisor_view(node: dict, service: dict | None, uuids: bool, detail: bool) -> dict:
        view = {
            "id": node["uuid"] if uuids else node["id"],
            "hypervisor_hostname": node["hypervisor_hostname"],
            "state": "down" if service is None or service["forced_down"] else "up",
            "status": "disabled" if service is not None and service["disabled"] else "enabled",
        }
        if detail:
            view.update(hypervisor_type=node["hypervisor_type"], host_ip=node["host_ip"])
            view["service"] = {
                "id": None if service is None else (service["uuid"] if uuids else service["id"]),
                "host": node["host"],
                "disabled_reason": None if service is None else service["disabled_reason"],
            }
        return view

    def _hypervisor_list(self, req, uuids: bool, detail: bool) -> list[dict]:
        pattern = None
        if uuids:
            shipped = req.GET.get("hypervisor_hostname_pattern")
            spec = req.GET.get("hypervisor_hostname")
            if shipped is not None and spec is not None and shipped != spec:
                raise ApiError(
                    400,
                    "demo.conflicting-query",
                    "hypervisor_hostname_pattern %r and hypervisor_hostname %r differ; give one."
                    % (shorten(shipped), shorten(spec)),
                )
            pattern = shipped if shipped is not None else spec
            if pattern is not None and ("limit" in req.GET or "marker" in req.GET):
                raise ApiError(400, "demo.bad-query", "Paging over a hypervisor hostname search is not supported.")
        return self._matching(pattern, uuids, detail)

    def _matching(self, pattern: str | None, uuids: bool, detail: bool) -> list[dict]:
        nodes, unanswered = self.cells.nodes(pattern)
        if pattern is not None and not nodes:
            if unanswered:
                # The cells that did not answer may hold a match: not a false 404.
                raise self.unavailable(unanswered)
            raise ApiError(404, "demo.not-found", "No hypervisor matching %r could be found." % shorten(pattern))
        return [self._hypervisor_view(node, service, uuids, detail) for _, node, service in nodes]
