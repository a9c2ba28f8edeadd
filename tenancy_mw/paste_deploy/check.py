"""The deployment checker: what a paste file does wrong with the tenancy_mw filters.

:func:`check` follows every route of the file (:mod:`.graph`) and reports,
as :class:`Finding` objects:

``skipped-filter``
    A route that skips a tenancy_mw filter which another route from the
    same entry point to the same app runs: a way around it (nova's legacy
    ``/v2`` composite without the ``admin_cull`` of ``/v2.1``).  Routes
    from different entry points are different endpoints (a public and an
    admin one may differ on purpose), and are not compared.
``second-strip``
    More than one ``tenant_path`` on a route, one of them with
    ``strip_tenant``: the second reads the segment after the tenant as one.
``order``
    An order the filters know to be wrong: ``tenant_path`` with
    ``token_tenant`` or ``check_token_project``, ``idempotency`` with
    ``keystone_scope``, or ``admin_cull`` with ``admin_roles``, where no
    keystonemiddleware ``authtoken`` runs before it (they trust headers
    only keystonemiddleware makes trustworthy); ``tenant_admin``,
    ``id_resolver`` or ``idempotency`` before the route's ``tenant_path``
    (they use its decision).  ``admin_cull`` before or after ``tenant_path``
    is fine either way: it judges the path the app routes on too.
``tenant-layout``
    ``tenant_in_path = always`` in front of nova's or cinder's API, which
    serve every route without the project id as well.
``bad-option``
    A tenancy_mw section with an option the filter does not have, or a
    value it refuses (checked as when the pipeline loads, without building
    the filter); a value paste cannot interpolate.
``unloadable``
    A tenancy_mw filter that cannot be imported here (a missing extra):
    run the checker with the service's own Python.
``unresolved``
    A route that cannot be followed: a name with no section, a loop, a
    pipeline factory without the auth strategy's pipeline.

Options the filters would read from the service's config file
(``oslo_config_project``, or the service's global configuration) are not
seen: the checker judges what the paste file says, and the defaults.

    >>> findings = check('''
    ... [composite:main]
    ... use = egg:Paste#urlmap
    ... /v2.1: public
    ... /v2: legacy
    ... [pipeline:public]
    ... pipeline = authtoken admin_cull service
    ... [pipeline:legacy]
    ... pipeline = authtoken service
    ... [filter:authtoken]
    ... paste.filter_factory = keystonemiddleware.auth_token:filter_factory
    ... [filter:admin_cull]
    ... use = egg:tenancy_mw#admin_cull
    ... [app:service]
    ... paste.app_factory = service.api:App.factory
    ... ''')
    >>> for finding in findings:
    ...     print(finding)
    skipped-filter main[/v2] > legacy > service: runs no admin_cull, which main[/v2.1] > public > service runs
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tenancy_mw.paste_deploy.filters import AUTHTOKEN, filter_class, option_problems, option_value, tenancy_kind
from tenancy_mw.paste_deploy.graph import PasteGraph, Route, Section

__all__ = ["FINDING_KINDS", "TENANTLESS_APPS", "Finding", "check"]

#: Every kind of finding, in the order :func:`check` reports them.
FINDING_KINDS = (
    "unresolved",
    "bad-option",
    "unloadable",
    "order",
    "second-strip",
    "tenant-layout",
    "skipped-filter",
)
#: API apps that serve every route with and without the project id after the version.
TENANTLESS_APPS = frozenset(
    {"nova.api.openstack.compute:APIRouterV21.factory", "cinder.api.v3.router:APIRouter.factory"}
)
# Filters that act on the tenant tenant_path decided, so come after it.
_AFTER_TENANT_PATH = ("tenant_admin", "id_resolver", "idempotency")
# Options that, when on (or not empty), trust keystonemiddleware's identity headers.
_TRUSTS_KEYSTONE = (
    ("tenant_path", "token_tenant"),
    ("tenant_path", "check_token_project"),
    ("idempotency", "keystone_scope"),
    ("admin_cull", "admin_roles"),
)


@dataclass(frozen=True)
class Finding:
    """One thing the checker found: its *kind* (see the module doc), where, and what.

    *route* is a route's label (``osapi_compute[/v2/+] > ... > app``) or a
    section (``[filter:tenant_path]``).  ``str()`` gives the one line the
    command prints.

        >>> print(Finding("order", "[filter:x]", "runs too early"))
        order [filter:x]: runs too early
    """

    kind: str
    route: str
    message: str

    def __str__(self) -> str:
        return "%s %s: %s" % (self.kind, self.route, self.message)


class _Filters:
    """The tenancy_mw filter classes met so far; a class that cannot be imported is None."""

    def __init__(self) -> None:
        self.classes: dict[str, Any] = {}
        self.errors: dict[str, str] = {}

    def get(self, kind: str) -> Any:
        if kind not in self.classes:
            try:
                self.classes[kind] = filter_class(kind)
            except ImportError as exc:
                self.classes[kind] = None
                self.errors[kind] = str(exc)
        return self.classes[kind]

    def value(self, section: Section, name: str) -> Any:
        kind = tenancy_kind(section.target)
        cls = self.get(kind) if kind else None
        return option_value(cls, section.conf, name) if cls is not None else None


def check(text: str, *, auth_strategy: str = "keystone", source: str = "api-paste.ini") -> list[Finding]:
    """Every :class:`Finding` of the paste file *text* (see the module documentation).

    *auth_strategy* picks the pipeline of each pipeline-factory composite
    (the service's ``auth_strategy``), or ``"all"`` for every key.
    Raises :class:`~tenancy_mw.paste_deploy.ini.PasteFileError` when paste
    could not read the file at all.

        >>> check("[pipeline:main]\\npipeline = tenant_path app\\n[app:app]\\nuse = egg:svc\\n")
        [Finding(kind='unresolved', route='main', message="names a filter 'tenant_path', which has no section")]
    """
    graph = PasteGraph(text, source)
    routes, problems = graph.routes(auth_strategy)
    filters = _Filters()
    found = [Finding("unresolved", p.where, p.message) for p in problems]
    found += [Finding("bad-option", p.where, p.message) for p in graph.value_problems]
    found += _section_findings(graph, filters)
    for route in routes:
        found += _route_findings(route, filters)
    found += _skipped_filters(routes)
    order = {kind: index for index, kind in enumerate(FINDING_KINDS)}
    return sorted(dict.fromkeys(found), key=lambda f: order[f.kind])


def _section_findings(graph: PasteGraph, filters: _Filters) -> list[Finding]:
    found = []
    for section in graph.sections.values():
        kind = tenancy_kind(section.target)
        if kind is None or section.kind not in ("filter", "filter-app"):
            continue
        where = "[%s]" % section.header
        cls = filters.get(kind)
        if cls is None:
            found.append(Finding("unloadable", where, "%s cannot be loaded here: %s" % (kind, filters.errors[kind])))
            continue
        conf = {k: v for k, v in section.conf.items() if k != "next"}
        found += [Finding("bad-option", where, "%s: %s" % (kind, message)) for message in option_problems(cls, conf)]
    return found


def _route_findings(route: Route, filters: _Filters) -> Iterator[Finding]:
    kinds = [tenancy_kind(f.target) for f in route.filters]
    auth = [index for index, f in enumerate(route.filters) if f.target in AUTHTOKEN]
    tenant_paths = [index for index, kind in enumerate(kinds) if kind == "tenant_path"]
    for index, (section, kind) in enumerate(zip(route.filters, kinds, strict=True)):
        for filter_kind, option in _TRUSTS_KEYSTONE:
            if kind == filter_kind and filters.value(section, option) and not any(a < index for a in auth):
                where = "runs before authtoken" if auth else "runs with no authtoken on this route"
                yield Finding(
                    "order",
                    route.label,
                    "%s (%s) %s, yet %s trusts keystonemiddleware's identity headers"
                    % (section.name, kind, where, option),
                )
        if kind in _AFTER_TENANT_PATH and tenant_paths and index < tenant_paths[0]:
            yield Finding(
                "order",
                route.label,
                "%s (%s) runs before %s (tenant_path), whose tenant it uses"
                % (section.name, kind, route.filters[tenant_paths[0]].name),
            )
    if len(tenant_paths) > 1 and any(filters.value(route.filters[i], "strip_tenant") for i in tenant_paths):
        names = ", ".join(route.filters[i].name for i in tenant_paths)
        yield Finding(
            "second-strip",
            route.label,
            "runs tenant_path %d times (%s) and one strips the tenant: the next takes a collection for it"
            % (len(tenant_paths), names),
        )
    yield from _layout_findings(route, kinds, tenant_paths, filters)


def _layout_findings(route: Route, kinds: list[str | None], tenant_paths: list[int], filters: _Filters):
    if route.app.target not in TENANTLESS_APPS:
        return
    # The first tenant_path decides for every later filter; without one, each decides on its own.
    deciders = tenant_paths[:1] or [i for i, kind in enumerate(kinds) if kind in ("tenant_admin", "id_resolver")]
    for index in deciders:
        section = route.filters[index]
        if filters.value(section, "tenant_in_path") == "always":
            yield Finding(
                "tenant-layout",
                route.label,
                "%s has tenant_in_path = always, but %s serves routes without the project id too "
                "(the first segment would be taken for a tenant): use optional" % (section.name, route.app.name),
            )


def _skipped_filters(routes: list[Route]) -> list[Finding]:
    groups: dict[tuple[str, str], list[Route]] = {}
    for route in routes:
        groups.setdefault((route.root, route.app.target or route.app.header), []).append(route)
    found = []
    for group in groups.values():
        runs: dict[Route, set[str]] = {
            route: {k for f in route.filters if (k := tenancy_kind(f.target))} for route in group
        }
        everything = set().union(*runs.values())
        for route in group:
            for kind in sorted(everything - runs[route]):
                other = next(r for r in group if kind in runs[r])
                found.append(Finding("skipped-filter", route.label, "runs no %s, which %s runs" % (kind, other.label)))
    return found
