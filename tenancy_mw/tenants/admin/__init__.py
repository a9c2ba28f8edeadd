"""``tenant_admin``: the tenants spec's admin API for any service, and the tenant-state check.

The spec says every service MUST offer tenant admin calls on
``/{version}/{tenantId}``.  This filter answers them itself, from a tenant
registry in SQL (:mod:`tenancy_mw.tenants.registry`), so the wrapped
service does not have to:

============================================  ==========================================================
Call                                          Answer
============================================  ==========================================================
``GET /{v}/{t}``                              ``200`` and the representation, ``ETag`` and the metadata
                                              headers (``204`` with ``representations = false``;
                                              with ``version_discovery``, see below);
                                              ``404`` unknown or purged; ``410`` deleted
``HEAD /{v}/{t}``                             ``204``, the same headers, no body; ``404``/``410``
``PUT /{v}/{t}``                              ``201`` created, ``202`` modified (or unchanged: PUT is
                                              idempotent); body a JSON object (empty: ``{}``), at most
                                              ``max_body_bytes``; ``400``/``413``/``415`` for a bad
                                              body; ``409`` when deleted, or when the representation
                                              differs and ``updatable = false``
``DELETE /{v}/{t}``                           ``204`` (marked deleted, recoverable); ``404``; ``410``
``POST /{v}/{t}/action/restore``              ``200`` and the representation (``204`` without); ``404``;
                                              ``409`` when the tenant is not deleted
``GET /{v}/{t}/{path}/action/move?dest=D``    the move action document and its ``ETag``
``POST /{v}/{t}/{path}/action/move?dest=D``   ``303``, ``Location`` at the resource's new home; with
                                              ``If-Match``, only if the document's ETag still matches,
                                              else ``412``
``GET|POST /{v}/{t}/action/move?dest=D``      the same for all of the tenant's resources; ``303`` to
                                              the destination tenant, which keeps the source tenant
============================================  ==========================================================

Moves need ``move_provider``, a small interface the service implements
(:mod:`tenancy_mw.tenants.moves`); without it, move URLs go to the service.  Move
errors: ``400`` when ``dest`` is missing, repeated, not a valid tenant id
or the source itself; ``404`` when the destination tenant does not exist
(``409`` when it is deleted); ``404``/``410`` when the resource does not
exist or is deleted; ``400`` for an ``If-Match`` that is not a list of
entity tags.  A moved resource's old path answers ``301`` with
``Location`` at its new one (a move call there: at the move URL of the
new place).  With ``If-Match``, any change since the ``GET`` (the
resource moved, deleted, changed, a tenant changed) is ``412``.

Version discovery on the admin endpoint: ``version_discovery``
    ``/{v}/{t}`` is also the URL a compute client is given as its
    endpoint, and python-novaclient (the ``nova`` command line too) GETs it
    for the service's version document before anything else.  With
    ``version_discovery = true``, ``GET /{v}/{t}`` answers ``200`` with the
    tenant's representation (none with ``representations = false``) plus a
    ``version`` member: what the service itself answers, under that name,
    to a plain ``GET /{v}`` below the same mount (the filter asks it once
    per such GET, with none of the client's credentials, cookies, tenant
    header, conditions or version headers).  ``ETag`` and the metadata
    headers stay the tenant's (the ``ETag`` is the representation's, not
    the body's); ``HEAD`` is unchanged.  A ``PUT`` may send the ``version``
    member back as a ``GET`` showed it (it is dropped, not stored); any
    other ``version`` member is ``400``.  When the service has no such
    document, fails, or answers more than 64 KiB or JSON that is not
    JSON's, the tenant is shown as without the option (logged).

The tenant-state check
    Every other request under ``/{v}/{t}/...`` passes to the service only
    while the tenant is active: an unknown (or purged) tenant is answered
    ``404``, a deleted one ``410`` (``check_tenant_state``, on by default).
    A request whose tenant ``tenant_path`` took from the token
    (``token_tenant``, a path without a tenant) is checked the same way,
    and is never an admin call.  Run the same filter on the public endpoint
    with ``admin_api = false``: it answers no admin call (put ``admin_cull``
    before it, which culls them) and still checks tenant states and
    redirects moved resources.

Which paths name a tenant
    ``tenant_path``'s decision (``environ['tenancy.tenant_segment']``) when
    it runs before this filter; else this filter's own layout options
    (``tenant_in_path``, ``tenantless_collections``,
    ``extra_tenantless_collections``, ``tenant_id_pattern``,
    ``version_pattern``: :class:`~tenancy_mw.tenants.ids.TenantLayout`).  A
    collection is never a tenant: ``GET /v2.1/servers`` on the admin
    endpoint is the service's server list, passed on, not "get tenant
    servers".

Caching across worker processes
    The check reads tenant states from an in-process cache that keeps each
    state ``cache_ttl`` seconds (default 5), so checking a tenant does not
    cost a database round trip per request.  Each worker process (and
    host) has its own cache: a tenant deleted through one worker is seen as
    deleted by the others within ``cache_ttl`` seconds, and an id looked up
    before it was created is seen as unknown for at most as long.  The
    admin calls themselves always read the database.  ``cache_ttl = 0``
    reads the database on every request.

Consistency of moves
    A move, conditional or not, runs inside one registry transaction that
    locks both tenants' rows (``SELECT ... FOR UPDATE`` on PostgreSQL and
    MariaDB/MySQL, ``BEGIN IMMEDIATE`` on SQLite): the ``If-Match`` check
    and the move are atomic with respect to other moves, deletes and PUTs
    of those tenants, across processes and hosts.

Usage in ``api-paste.ini`` (after ``tenant_path``, which finds the tenant)::

    [pipeline:admin]
    pipeline = request_id tenant_path tenant_admin service

    [pipeline:public]
    pipeline = request_id admin_cull tenant_path tenant_admin_public service

    [filter:tenant_admin]
    use = egg:tenancy_mw#tenant_admin
    connection = postgresql+psycopg2://svc@db/svc
    move_provider = svc.moves:ServiceMoves

    [filter:tenant_admin_public]
    use = egg:tenancy_mw#tenant_admin
    connection = postgresql+psycopg2://svc@db/svc
    admin_api = false

The registry's tables come from ``tenancy-mw-manage db upgrade --url URL
--component tenants``; deleted tenants are removed for good by
``tenancy-mw-manage tenants purge --url URL --retention 30d``.

From Python::

    >>> import os, tempfile
    >>> from tenancy_mw import migrations
    >>> from tenancy_mw.tenants.admin import TenantAdmin
    >>> url = "sqlite:///" + os.path.join(tempfile.mkdtemp(), "tenants.sqlite")
    >>> migrations.upgrade(url, components=["tenants"])
    ['tenants']
    >>> def service_app(environ, start_response):
    ...     start_response("204 No Content", [])
    ...     return []
    >>> admin_app = TenantAdmin(service_app, {"connection": url})
    >>> from webtest import TestApp
    >>> TestApp(admin_app).get("/v2.1/acme/servers", status=404).json["errors"][0]["code"]
    'tenancy.tenant-not-found'
    >>> admin_app.close()

The package, one job a module: :mod:`~tenancy_mw.tenants.admin.filter`
(the class, the request path), :mod:`~tenancy_mw.tenants.admin.routes`
(the tenant and the action in the path, the dispatch table),
:mod:`~tenancy_mw.tenants.admin.state` (the state check and its cache),
:mod:`~tenancy_mw.tenants.admin.api` (the tenant calls),
:mod:`~tenancy_mw.tenants.admin.representation` (a PUT's body),
:mod:`~tenancy_mw.tenants.admin.move_action` (the move actions),
:mod:`~tenancy_mw.tenants.admin.redirects` (``301`` for moved resources),
:mod:`~tenancy_mw.tenants.admin.discovery` (``version_discovery``),
:mod:`~tenancy_mw.tenants.admin.answers` (errors, redirects, URLs, ETags)
and :mod:`~tenancy_mw.tenants.admin.options`.  Until 0.2.0 this was the
module ``tenancy_mw.tenant_admin``; ``tenancy_mw.tenants.admin_filter``
still imports as it.
"""

from __future__ import annotations

from tenancy_mw.tenants.admin.answers import parse_if_match
from tenancy_mw.tenants.admin.discovery import DISCOVERY_BODY_LIMIT, DISCOVERY_MEMBER
from tenancy_mw.tenants.admin.filter import TenantAdmin, list_opts, set_defaults
from tenancy_mw.tenants.admin.options import OPTS

__all__ = [
    "DISCOVERY_BODY_LIMIT",
    "DISCOVERY_MEMBER",
    "OPTS",
    "TenantAdmin",
    "list_opts",
    "parse_if_match",
    "set_defaults",
]
