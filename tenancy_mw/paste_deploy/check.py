"""The deployment checker: what a paste file does wrong with the tenancy_mw filters.

:func:`check` follows every route of the file (:mod:`.graph`) and reports,
as :class:`Finding` objects:

``skipped-filter``
    A route that skips a tenancy_mw filter which another route from the
    same entry point to the same app runs: a way around it (nova's legacy
    ``/v2`` composite without the ``admin_cull`` of ``/v2.1``).  Routes
    from different entry points are different endpoints (a public and an
    admin one may differ on purpose), and are not compared.
``differs``
    A tenancy_mw filter that a route runs with other options than the same
    filter on another route from the same entry point to the same app (the
    legacy ``/v2`` composite's ``admin_cull`` with fewer rules): the
    options that differ are named.  Routes of different auth strategies
    (cinder's ``noauth`` and ``keystone``) are alternatives, not compared;
    ``keystone`` and ``keystone_nolimit`` are.
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
``token-ignored``
    The other way round: a filter that ignores the token though
    ``authtoken`` runs before it.  ``idempotency`` with ``keystone_scope``
    off scopes tokens by the path's tenant, so another project's request
    with the same idempotency token can replay this one's answer;
    ``tenant_path`` with ``token_tenant`` and ``check_token_project`` off
    in front of nova's or cinder's API gives their project-less paths no
    tenant, and takes a path's project id unchecked.
``tenant-layout``
    ``tenant_in_path = always`` in front of nova's or cinder's API, which
    serve every route without the project id as well; a
    ``tenantless_collections`` there without names of the default list
    (:data:`~tenancy_mw.tenants.ids.DEFAULT_TENANTLESS_COLLECTIONS`), which
    would be read as tenants.
``bad-option``
    A tenancy_mw section with an option the filter does not have, or a
    value it refuses (checked as when the pipeline loads, without opening
    anything: :mod:`.filters`); a value paste cannot interpolate.
``unloadable``
    A tenancy_mw filter that cannot be imported here (a missing extra):
    run the checker with the service's own Python.
``unresolved``
    A route that cannot be followed: a name with no section, a loop (of
    ``use``, of ``filter-with``, of sections), a pipeline factory without
    the auth strategy's pipeline.

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

from tenancy_mw.paste_deploy.filters import (
    AUTHTOKEN,
    PASTE_CONTROL_KEYS,
    filter_class,
    option_problems,
    option_value,
    tenancy_kind,
)
from tenancy_mw.paste_deploy.graph import PasteGraph, Route, Section
from tenancy_mw.tenants.ids import DEFAULT_TENANTLESS_COLLECTIONS

__all__ = ["FINDING_KINDS", "TENANTLESS_APPS", "Finding", "check"]

#: Every kind of finding, in the order :func:`check` reports them.
FINDING_KINDS = (
    "unresolved",
    "bad-option",
    "unloadable",
    "order",
    "token-ignored",
    "second-strip",
    "tenant-layout",
    "skipped-filter",
    "differs",
)
#: API apps that serve every route with and without the project id after the version.
TENANTLESS_APPS = frozenset(
    {"nova.api.openstack.compute:APIRouterV21.factory", "cinder.api.v3.router:APIRouter.factory"}
)
# Filters that act on the tenant tenant_path decided, so come after it.
_AFTER_TENANT_PATH = ("tenant_admin", "id_resolver", "idempotency")
# Options that, when all off behind authtoken, leave the token unused: (options, what follows).
_IGNORES_TOKEN = {
    "idempotency": (
        ("keystone_scope",),
        "tokens are scoped by the path's tenant, so another project's request with the same idempotency token "
        "can replay this one's answer; turn keystone_scope on",
    ),
    "tenant_path": (
        ("token_tenant", "check_token_project"),
        "a path without a project id gets no tenant, and a path's project id is not checked against the "
        "token's; turn them on",
    ),
}
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

    def effective(self, section: Section) -> dict[str, Any]:
        """Every option the filter of *section* runs with (defaults included); its raw keys if not loadable."""
        kind = tenancy_kind(section.target)
        cls = self.get(kind) if kind else None
        if cls is None:
            return dict(section.conf)
        found = {opt.dest: option_value(cls, section.conf, opt.dest) for opt in cls.all_opts()}
        found.update((key, section.conf[key]) for key in PASTE_CONTROL_KEYS if key in section.conf)
        return found


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
    found += _differing_filters(routes, filters)
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
        if kind is not None:
            yield from _trust_findings(route, section, kind, [a for a in auth if a < index], bool(auth), filters)
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


def _trust_findings(
    route: Route, section: Section, kind: str, auth_before: list[int], any_auth: bool, filters: _Filters
) -> Iterator[Finding]:
    """``order`` for a filter trusting the token with no authtoken before it; ``token-ignored`` the other way."""
    for filter_kind, option in _TRUSTS_KEYSTONE:
        if kind == filter_kind and filters.value(section, option) and not auth_before:
            where = "runs before authtoken" if any_auth else "runs with no authtoken on this route"
            yield Finding(
                "order",
                route.label,
                "%s (%s) %s, yet %s trusts keystonemiddleware's identity headers" % (section.name, kind, where, option),
            )
    ignored = _IGNORES_TOKEN.get(kind)
    if not auth_before or ignored is None or (kind == "tenant_path" and route.app.target not in TENANTLESS_APPS):
        return
    options, consequence = ignored
    # False, not None: None is an option the filter refused or a filter that cannot load here.
    if all(filters.value(section, option) is False for option in options):
        yield Finding(
            "token-ignored",
            route.label,
            "%s (%s) runs after authtoken with %s off: %s" % (section.name, kind, " and ".join(options), consequence),
        )


def _layout_findings(
    route: Route, kinds: list[str | None], tenant_paths: list[int], filters: _Filters
) -> Iterator[Finding]:
    if route.app.target not in TENANTLESS_APPS:
        return
    # The first tenant_path decides for every later filter; without one, each decides on its own.
    deciders = tenant_paths[:1] or [i for i, kind in enumerate(kinds) if kind in ("tenant_admin", "id_resolver")]
    for index in deciders:
        section = route.filters[index]
        layout = filters.value(section, "tenant_in_path")
        if layout == "always":
            yield Finding(
                "tenant-layout",
                route.label,
                "%s has tenant_in_path = always, but %s serves routes without the project id too "
                "(the first segment would be taken for a tenant): use optional" % (section.name, route.app.name),
            )
        collections = filters.value(section, "tenantless_collections")
        missing = sorted(set(DEFAULT_TENANTLESS_COLLECTIONS) - {name.strip() for name in collections or ()})
        if layout == "optional" and collections is not None and missing:
            yield Finding(
                "tenant-layout",
                route.label,
                "%s (%s) has a tenantless_collections without %d of the default names (%s%s): %s serves them "
                "without the project id, and they would be taken for tenants"
                % (section.name, kinds[index], len(missing), ", ".join(missing[:5]), ", ..." * (len(missing) > 5),
                   route.app.name),
            )  # fmt: skip


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


def _differing_filters(routes: list[Route], filters: _Filters) -> list[Finding]:
    """``differs``: a filter kind run with other options than on another route to the same app."""
    groups: dict[tuple, list[Route]] = {}
    for route in routes:
        # Auth strategies are alternatives (one runs); a strategy and its _nolimit twin are not.
        strategies = tuple(p.key.removesuffix("_nolimit") for p in route.passes if not p.header.startswith("pipeline:"))
        groups.setdefault((route.root, route.app.target or route.app.header, strategies), []).append(route)
    found = []
    for group in groups.values():
        runs: dict[str, dict[Route, list[tuple[Section, dict[str, Any]]]]] = {}
        for route in group:
            for section in route.filters:
                kind = tenancy_kind(section.target)
                if kind is not None:
                    runs.setdefault(kind, {}).setdefault(route, []).append((section, filters.effective(section)))
        for kind, by_route in sorted(runs.items()):
            reference = _reference(by_route)
            for route, run in by_route.items():
                message = _difference(kind, run, by_route[reference], reference)
                if message:
                    found.append(Finding("differs", route.label, message))
    return found


def _reference(by_route: dict[Route, list[tuple[Section, dict[str, Any]]]]) -> Route:
    """The route whose options of one filter kind most routes share; on a tie, the one whose sections write most."""
    shapes = {route: repr([sorted(options.items()) for _, options in run]) for route, run in by_route.items()}
    counts = {shape: list(shapes.values()).count(shape) for shape in shapes.values()}
    explicit = {route: sum(len(set(section.raw) - {"use"}) for section, _ in run) for route, run in by_route.items()}
    return max(by_route, key=lambda route: (counts[shapes[route]], explicit[route]))


def _difference(
    kind: str, run: list[tuple[Section, dict[str, Any]]], other: list[tuple[Section, dict[str, Any]]], where: Route
) -> str | None:
    """How *run* (one route's filters of *kind*) differs from *other*'s, on route *where*; None if not."""
    if len(run) != len(other):
        return "runs %s %d times, %s %d" % (kind, len(run), where.label, len(other))
    for (section, options), (theirs, their_options) in zip(run, other, strict=True):
        names = sorted(
            key for key in options.keys() | their_options.keys() if options.get(key) != their_options.get(key)
        )
        if names:
            return "%s (%s) differs in %s from %s on %s" % (
                section.name,
                kind,
                ", ".join(names),
                theirs.name,
                where.label,
            )
    return None
