"""The recipe: add the tenancy_mw filters to nova's or cinder's own installed ``api-paste.ini``.

:func:`add_filters` rewrites the service's paste file line by line (every
original section, comment and line stays) so that **every** pipeline that
reaches the service's API app runs the filters: both of nova's composites
(``/v2.1`` and the legacy ``/v2``), every key (auth strategy) of each, and
cinder's ``/v3`` composite with all its keys.  Where they go:

- right after ``authtoken``, so before nova's and cinder's
  ``keystonecontext`` and nova's ``legacy_v2_compatible``, which stay just
  before the app.  Public endpoint::

      ... authtoken admin_cull tenant_path idempotency tag_query keystonecontext [legacy_v2_compatible] app

  admin endpoint: the same without ``admin_cull``.  cinder gets no
  ``tag_query`` (it has no tag queries to read).
- in a pipeline without ``authtoken`` where an outer pipeline or a
  ``filter-with`` runs it earlier on every route, just before
  ``keystonecontext`` (or the app), as they are.
- in a pipeline that no route reaches after ``authtoken`` (cinder's
  ``noauth`` keys), just before the app, as ``tenant_path_noauth`` and
  ``idempotency_noauth``: the same sections (``use = tenant_path``) with
  ``token_tenant``, ``check_token_project`` and ``keystone_scope`` off,
  since nothing there makes keystonemiddleware's identity headers
  trustworthy.  A pipeline that some routes reach after ``authtoken`` and
  others not is refused (:class:`RecipeError`): neither variant is right
  for both.

The sections it appends:

``[filter:tenant_path]``
    ``tenant_in_path = optional``, ``tenant_id_pattern = [0-9a-f-]+`` (the
    project-id pattern of nova's and cinder's routers), ``token_tenant``
    and ``check_token_project`` on, nova's error format.
``[filter:admin_cull]`` (public endpoint)
    ``policy_namespace``: the service's admin-only calls, derived when the
    pipeline loads from its own policy defaults and the deployment's policy
    file (``tenancy-mw-manage cull derive --namespace nova`` prints them);
    ``rules``: what the policy's documentation does not say, the paths the
    service routes admin calls on but documents otherwise
    (:data:`CINDER_UNDOCUMENTED_RULES`; none for nova);
    ``policy_member_calls``: the members' calls it documents under an
    admin-only rule alone (:data:`CINDER_MEMBER_CALLS`; none for nova).
``[filter:idempotency]``
    the error format only: set ``backend``, ``memcached_servers`` (or
    ``connection``) and ``secret`` with ``--set``, or leave them out and
    write them in the service's own config file, section
    ``[idempotency]``: nova and cinder load their config files into
    oslo.config's global configuration before the pipeline, and the filter
    reads an option its paste section leaves out from there.
``[filter:tag_query]`` (nova)
    ``not_tags_semantics = nova``.

*settings* (``--set FILTER.OPTION=VALUE``) add or replace options of those
sections; each must be an option of that filter and a value it takes.

    >>> print(add_filters('''[composite:api]
    ... use = call:nova.api.auth:pipeline_factory_v21
    ... keystone = authtoken keystonecontext app
    ... [filter:authtoken]
    ... paste.filter_factory = keystonemiddleware.auth_token:filter_factory
    ... [filter:keystonecontext]
    ... paste.filter_factory = nova.api.auth:NovaKeystoneContext.factory
    ... [app:app]
    ... paste.app_factory = nova.api.openstack.compute:APIRouterV21.factory
    ... ''', "nova", settings={"idempotency.backend": "memcached"}))
    [composite:api]
    use = call:nova.api.auth:pipeline_factory_v21
    keystone = authtoken admin_cull tenant_path idempotency tag_query keystonecontext app
    ...
    [filter:idempotency]
    use = egg:tenancy_mw#idempotency
    error_format = nova
    backend = memcached
    ...
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from tenancy_mw.paste_deploy.filters import AUTHTOKEN, PASTE_CONTROL_KEYS, filter_class, option_problems, tenancy_kind
from tenancy_mw.paste_deploy.graph import PasteGraph, Route
from tenancy_mw.paste_deploy.ini import PasteLines

__all__ = [
    "CINDER_ADMIN_RULES",
    "CINDER_MEMBER_CALLS",
    "CINDER_UNDOCUMENTED_RULES",
    "NOVA_ADMIN_RULES",
    "RECIPES",
    "RecipeError",
    "ServiceRecipe",
    "SettingError",
    "add_filters",
    "parse_settings",
]

#: nova's admin-only calls, written by hand (the recipe before ``policy_namespace``:
#: kept for deployments that list their rules themselves).  Source: nova 34.0.0's
#: policy defaults (``nova/policies/*.py``): every operation of a
#: ``DocumentedRuleDefault`` whose ``check_str`` is ``base.ADMIN``, its
#: ``{placeholders}`` as ``*``.  Left out, because members reach the same
#: method and path: server actions (``POST /servers/{id}/action``: migrate,
#: evacuate, os-resetState...; nova's policy still refuses them),
#: ``GET /servers``, ``/servers/detail``, ``/os-migrations``, ``/limits``
#: and ``/os-server-groups`` with an admin-only parameter.
NOVA_ADMIN_RULES = (
    "POST            /flavors",
    "PUT,DELETE      /flavors/*",
    "POST            /flavors/*/action",  # addTenantAccess, removeTenantAccess: every flavor action
    "GET             /flavors/*/os-flavor-access",
    "POST            /flavors/*/os-extra_specs",
    "PUT,DELETE      /flavors/*/os-extra_specs/*",
    "*               /os-aggregates/**",
    "GET             /os-availability-zone/detail",
    "*               /os-baremetal-nodes/**",
    "*               /os-console-auth-tokens/**",
    "*               /os-hosts/**",
    "*               /os-hypervisors/**",
    "*               /os-instance_usage_audit_log/**",
    "*               /os-quota-class-sets/**",
    "PUT,DELETE      /os-quota-sets/*",
    "*               /os-services/**",
    "GET             /os-simple-tenant-usage",
    "GET             /servers/*/diagnostics",
    "GET             /servers/*/migrations/*",
)
#: cinder's admin-only calls, written by hand (the recipe before
#: ``policy_namespace``: kept for deployments that list their rules themselves).  Source: cinder
#: 29.0.0's policy defaults (``cinder/policies/*.py``): every operation of a
#: ``DocumentedRuleDefault`` whose ``check_str`` is ``base.RULE_ADMIN_API``,
#: and the same calls under the names ``cinder/api/contrib/`` still routes
#: (``os-volume-manage``, ``os-snapshot-manage``: the controllers check
#: ``volume_manage``, ``snapshot_manage`` and ``list_manageable``, whose
#: documented paths are ``/manageable_volumes`` and ``/manageable_snapshots``).
#: Left out, because members reach the same method and path: volume,
#: snapshot and group actions (``POST /volumes/{id}/action``...), and reads
#: with admin-only attributes.
CINDER_ADMIN_RULES = (
    "POST            /backups/*/action",  # os-force_delete, os-reset_status: every backup action
    "*               /backups/*/export_record",
    "POST            /backups/**/import_record",  # routed as /backups/import_record
    "GET             /capabilities/**",
    "*               /clusters/**",
    "*               /default-types/**",
    "POST            /group_snapshots/*/action",  # reset_status: every group snapshot action
    "POST,PUT,DELETE /group_types/**",
    "GET             /group_types/*/group_specs/**",
    "*               /manageable_snapshots/**",
    "*               /manageable_volumes/**",
    "*               /os-hosts/**",
    "*               /os-quota-class-sets/**",
    "PUT,DELETE      /os-quota-sets/*",
    "*               /os-services/**",
    "*               /os-snapshot-manage/**",  # manageable_snapshots' older name
    "*               /os-volume-manage/**",  # manageable_volumes' older name
    "*               /qos-specs/**",
    "*               /scheduler-stats/**",
    "POST,PUT,DELETE /types/**",  # type create, update, delete, access, extra specs, encryption
    "GET             /types/*/encryption/**",
    "GET             /types/*/os-volume-type-access",
    "*               /workers/**",
)
#: cinder's admin calls its policy documentation does not give the path of,
#: added to what ``policy_namespace = cinder`` derives (cinder 29.0.0; the
#: real-OpenStack tests find them: tests/openstack/test_policy_truth.py).
CINDER_UNDOCUMENTED_RULES = (
    # Documented as /backups/{backup_id}/import_record; routed as /backups/import_record.
    "POST            /backups/**/import_record",
    # Documented as PUT /default-types; routed as /default-types/{project_id}.
    "PUT             /default-types/*",
    # Documented as PUT and DELETE /types; routed as /types/{type_id}.
    "PUT,DELETE      /types/*",
    # Documented as POST; routed as GET (cinder/api/contrib/backups.py: member_actions).
    "GET             /backups/*/export_record",
    # manageable_volumes' and manageable_snapshots' older names, still routed (cinder/api/contrib/).
    "*               /os-snapshot-manage/**",
    "*               /os-volume-manage/**",
)
#: cinder's members' calls its policy documentation lists under an admin-only
#: rule alone (``policy_member_calls``): ``group:access_group_types_specs``
#: only decides whether a group type's answer shows its specs (cinder 29.0.0,
#: cinder/api/v3/views/group_types.py, ``fatal=False``).
CINDER_MEMBER_CALLS = ("GET /group_types/{group_type_id}",)
# The sections for pipelines without authtoken: (name, the section it builds on, options turned off).
_NOAUTH = {
    "tenant_path": ("tenant_path_noauth", (("token_tenant", "false"), ("check_token_project", "false"))),
    "idempotency": ("idempotency_noauth", (("keystone_scope", "false"),)),
}
_COMMENTS = {
    "tenant_path": "The tenant: the path's project id where the URL has one (it must match the token's\n"
    "project unless the token has the admin role), else the token's project.",
    "idempotency": "Set backend, memcached_servers (or connection) and secret here, or in the service's\n"
    "config file, section [idempotency]; tokens are scoped by the token's project.",
    "tag_query": "nova reads not-tags and not-tags-any the other way round from the guideline.",
}


class RecipeError(ValueError):
    """The paste file does not fit the recipe (no API app, filters already there); see :func:`add_filters`."""


class SettingError(ValueError):
    """A ``--set`` that names no option of the recipe's filters, or a value the option refuses.

    >>> add_filters("", "nova", settings={"tag_query.not_tags_semantics": "reverse"})
    Traceback (most recent call last):
    ...
    tenancy_mw.paste_deploy.recipe.SettingError: --set tag_query.not_tags_semantics: ... = 'reverse' is refused: ...
    """


@dataclass(frozen=True)
class ServiceRecipe:
    """What the recipe knows of one service: its API app, and the sections it adds.

    >>> sorted(RECIPES["cinder"].api_apps)
    ['cinder.api.v3.router:APIRouter.factory']
    """

    service: str
    #: The API app's factory (its ``paste.app_factory``).
    api_apps: frozenset[str]
    #: Filters that stay right before the app (nova's ``legacy_v2_compatible``).
    tail_filters: frozenset[str]
    #: The service's ``keystonecontext``: the filters go before it.
    context_filters: frozenset[str]
    #: The filters, in pipeline order, with their options.
    sections: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]
    #: The admin calls ``admin_cull`` culls on the public endpoint beside those it derives from the policy.
    admin_rules: tuple[str, ...]
    #: The service's ``oslo.policy.policies`` name: ``admin_cull`` derives its admin calls from it.
    policy_namespace: str = ""
    #: Calls the service serves members that its policy documentation makes admin calls (``policy_member_calls``).
    member_calls: tuple[str, ...] = ()

    def filters(self, endpoint: str) -> list[str]:
        """The filters of *endpoint* (``public`` or ``admin``), in pipeline order.

        >>> RECIPES["nova"].filters("admin")
        ['tenant_path', 'idempotency', 'tag_query']
        """
        return [name for name, _ in self.sections if endpoint == "public" or name != "admin_cull"]


def _sections(
    error_format: str, namespace: str, rules: tuple[str, ...], *, tags: bool, member_calls: tuple[str, ...] = ()
) -> tuple:
    cull: tuple[tuple[str, str], ...] = (("error_format", error_format), ("policy_namespace", namespace))
    if member_calls:
        cull += (("policy_member_calls", "\n".join(member_calls)),)
    if rules:
        cull += (("rules", "\n".join(" ".join(r.split()) for r in rules)),)
    found = [
        ("admin_cull", cull),
        (
            "tenant_path",
            (
                ("tenant_in_path", "optional"),
                ("tenant_id_pattern", "[0-9a-f-]+"),
                ("token_tenant", "true"),
                ("check_token_project", "true"),
                ("error_format", error_format),
            ),
        ),
        ("idempotency", (("error_format", error_format),)),
    ]
    if tags:
        found.append(("tag_query", (("not_tags_semantics", "nova"), ("error_format", error_format))))
    return tuple(found)


#: The recipes, by service name.
RECIPES: dict[str, ServiceRecipe] = {
    "nova": ServiceRecipe(
        "nova",
        frozenset({"nova.api.openstack.compute:APIRouterV21.factory"}),
        frozenset({"nova.api.openstack:LegacyV2CompatibleWrapper.factory"}),
        frozenset({"nova.api.auth:NovaKeystoneContext.factory"}),
        _sections("nova", "nova", (), tags=True),
        (),
        "nova",
    ),
    "cinder": ServiceRecipe(
        "cinder",
        frozenset({"cinder.api.v3.router:APIRouter.factory"}),
        frozenset(),
        frozenset({"cinder.api.middleware.auth:CinderKeystoneContext.factory"}),
        # cinder's faults have nova's shape: {"badRequest": {"code": 400, "message": ...}}.
        _sections("nova", "cinder", CINDER_UNDOCUMENTED_RULES, tags=False, member_calls=CINDER_MEMBER_CALLS),
        CINDER_UNDOCUMENTED_RULES,
        "cinder",
        CINDER_MEMBER_CALLS,
    ),
}


def parse_settings(items: Iterable[str]) -> dict[str, str]:
    """``FILTER.OPTION=VALUE`` strings (``--set``) as ``{"FILTER.OPTION": "VALUE"}``.

    >>> parse_settings(["idempotency.backend=memcached", "idempotency.secret=a=b"])
    {'idempotency.backend': 'memcached', 'idempotency.secret': 'a=b'}
    >>> parse_settings(["backend=memcached"])
    Traceback (most recent call last):
    ...
    tenancy_mw.paste_deploy.recipe.SettingError: --set 'backend=memcached' is not FILTER.OPTION=VALUE
    """
    found = {}
    for item in items:
        name, equals, value = item.partition("=")
        filter_name, dot, option = name.strip().partition(".")
        if not equals or not dot or not filter_name or not option:
            raise SettingError("--set %r is not FILTER.OPTION=VALUE" % item)
        found["%s.%s" % (filter_name, option.strip())] = value.strip()
    return found


def _apply_settings(recipe: ServiceRecipe, endpoint: str, settings: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """The sections' options with *settings* applied; raises :class:`SettingError` on a bad one."""
    names = recipe.filters(endpoint)
    sections = {name: dict(options) for name, options in recipe.sections if name in names}
    for key, value in settings.items():
        filter_name, _, option = key.partition(".")
        if filter_name not in sections:
            raise SettingError(
                "--set %s: the %s recipe adds no filter %r on the %s endpoint; it adds %s"
                % (key, recipe.service, filter_name, endpoint, ", ".join(names))
            )
        if option not in PASTE_CONTROL_KEYS:
            try:
                cls = filter_class(filter_name)
            except ImportError as exc:
                raise SettingError("--set %s: cannot check it here: %s" % (key, exc)) from None
            problems = option_problems(cls, {option: value})
            if problems:
                raise SettingError("--set %s: %s: %s" % (key, filter_name, problems[0]))
        sections[filter_name][option] = value
    return sections


def _render(recipe: ServiceRecipe, endpoint: str, sections: dict[str, dict[str, str]], noauth: set[str]) -> str:
    out = [
        "##############\n# tenancy_mw #\n##############\n",
        "# Added by `tenancy-mw-manage paste add --service %s --endpoint %s`: the filters run in\n"
        "# every pipeline that reaches %s's API, right after authtoken.\n" % (recipe.service, endpoint, recipe.service),
    ]
    for name, options in sections.items():
        comment = _COMMENTS.get(name)
        if name == "admin_cull":
            comment = (
                "%s's admin-only calls, derived at load from its policy defaults and policy file;\n"
                "print them with: tenancy-mw-manage cull derive --namespace %s --config-file <%s.conf>"
                % (recipe.service, recipe.policy_namespace, recipe.service)
            )
        out.append("\n")
        if comment:
            out.append("".join("# %s\n" % line for line in comment.splitlines()))
        out.append("[filter:%s]\nuse = egg:tenancy_mw#%s\n" % (name, name))
        for option, value in options.items():
            # paste interpolates %(name)s in values: a literal % is written %%.
            lines = value.replace("%", "%%").splitlines() or [""]
            if len(lines) == 1:
                out.append("%s = %s\n" % (option, lines[0]))
            else:
                out.append("%s =\n%s" % (option, "".join("    %s\n" % line for line in lines)))
    for name in sorted(noauth):
        variant, off = _NOAUTH[name]
        out.append("\n# For pipelines without authtoken: no identity header can be trusted there.\n")
        out.append("[filter:%s]\nuse = %s\n%s" % (variant, name, "".join("%s = %s\n" % kv for kv in off)))
    return "".join(out)


def _api_pipelines(graph: PasteGraph, recipe: ServiceRecipe) -> Iterator[tuple[str, str, list[str]]]:
    """``(section header, key, words)`` of every pipeline whose last name is the service's API app."""
    for section in graph.sections.values():
        if section.kind == "pipeline":
            keys = ["pipeline"]
        elif section.kind == "composite" and not graph.is_urlmap(section):
            keys = list(section.conf)
        else:
            continue
        for key in keys:
            words = section.raw.get(key, "").split()
            app = graph.lookup(words[-1], "app", section.header) if words else None
            if app is not None and app.target in recipe.api_apps:
                yield section.header, key, words


def _authtoken_before(routes: list[Route], header: str, key: str, index: int) -> dict[bool, list[str]]:
    """The routes through pipeline *key* of *header*, by whether ``authtoken`` runs before its word *index*."""
    found: dict[bool, list[str]] = {}
    for route in routes:
        for step in route.passes:
            if (step.header, step.key) == (header, key):
                before = route.filters[: step.starts[index]]
                found.setdefault(any(f.target in AUTHTOKEN for f in before), []).append(route.label)
    return found


def _insertion(
    graph: PasteGraph, recipe: ServiceRecipe, routes: list[Route], header: str, key: str, words: list[str]
) -> tuple[int, bool, bool]:
    """Where the filters go in a pipeline: ``(word index, after it, without authtoken)``."""
    targets = []
    for word in words[:-1]:
        section = graph.lookup(word, "filter", "")
        targets.append(section.target if section is not None else "")
    auth = [index for index, target in enumerate(targets) if target in AUTHTOKEN]
    if auth:
        return auth[-1], True, False
    index = len(words) - 1
    while index > 0 and targets[index - 1] in recipe.tail_filters:
        index -= 1
    # authtoken may still run earlier, in an outer pipeline or a filter-with: decided per route.
    by_auth = _authtoken_before(routes, header, key, index)
    if len(by_auth) > 1:
        raise RecipeError(
            "[%s] %s: authtoken runs before the filters' place on route %s but not on route %s: they would "
            "trust the token on one and not on the other; give the routes pipelines of their own"
            % (header, key, by_auth[True][0], by_auth[False][0])
        )
    if not by_auth.get(True):
        return index, False, True
    context = [i for i, target in enumerate(targets[:index]) if target in recipe.context_filters]
    if context and _authtoken_before(routes, header, key, context[0]).keys() == {True}:
        return context[0], False, False
    return index, False, False


def add_filters(
    text: str,
    service: str,
    *,
    endpoint: str = "public",
    settings: Mapping[str, str] | None = None,
    source: str = "api-paste.ini",
) -> str:
    """The paste file *text* with the tenancy_mw filters added for *service*; see the module documentation.

    Raises :class:`SettingError` for a bad *service*, *endpoint* or
    setting, :class:`RecipeError` when the file does not fit the recipe,
    and :class:`~tenancy_mw.paste_deploy.ini.PasteFileError` when paste
    could not read it.

        >>> add_filters("[app:main]\\nuse = egg:svc\\n", "cinder")
        Traceback (most recent call last):
        ...
        tenancy_mw.paste_deploy.recipe.RecipeError: api-paste.ini has no pipeline that ends in cinder's API app ...
        >>> add_filters("", "glance")
        Traceback (most recent call last):
        ...
        tenancy_mw.paste_deploy.recipe.SettingError: unknown service: 'glance' (known: nova, cinder)
    """
    recipe = _recipe_for(service, endpoint)
    sections = _apply_settings(recipe, endpoint, settings or {})
    graph = PasteGraph(text, source)
    _refuse_unfit_file(graph, sections, source)
    lines = PasteLines(text)
    noauth = _insert_into_pipelines(graph, recipe, list(sections), lines, source)
    lines.append(_render(recipe, endpoint, sections, noauth))
    result = lines.text()
    _check_every_route(result, recipe, set(sections), source)
    return result


def _recipe_for(service: str, endpoint: str) -> ServiceRecipe:
    """The recipe of *service*; :class:`SettingError` for an unknown service or endpoint."""
    recipe = RECIPES.get(service)
    if recipe is None or endpoint not in ("public", "admin"):
        raise SettingError(
            "unknown %s: %r (known: %s)"
            % (("endpoint", endpoint, "public, admin") if recipe else ("service", service, ", ".join(RECIPES)))
        )
    return recipe


def _refuse_unfit_file(graph: PasteGraph, sections: Mapping[str, Mapping[str, str]], source: str) -> None:
    """Refuse a file that has the filters already, or a ``use`` loop paste cannot load."""
    ours = set(sections) | {variant for variant, _ in _NOAUTH.values()}
    present = [s.header for s in graph.sections.values() if tenancy_kind(s.target) or s.name in ours]
    if present:
        raise RecipeError(
            "%s already has %s: run the recipe on the service's own api-paste.ini"
            % (source, ", ".join("[%s]" % h for h in present))
        )
    if graph.use_loops:
        loop = graph.use_loops[0]
        raise RecipeError("%s: %s: %s: paste cannot load that section" % (source, loop.where, loop.message))


def _insert_into_pipelines(
    graph: PasteGraph, recipe: ServiceRecipe, kinds: list[str], lines: PasteLines, source: str
) -> set[str]:
    """Insert the filters *kinds* into every API pipeline of *lines*; return the filters used without auth."""
    routes, _ = graph.routes("all")
    noauth: set[str] = set()
    edited = 0
    for header, key, words in _api_pipelines(graph, recipe):
        try:
            index, after, without_auth = _insertion(graph, recipe, routes, header, key, words)
        except RecipeError as exc:
            raise RecipeError("%s: %s" % (source, exc)) from None
        names = kinds
        if without_auth:
            # Behind no auth filter, the variants of _NOAUTH take the place of the filters that need a token.
            noauth.update(n for n in kinds if n in _NOAUTH)
            names = [_NOAUTH[n][0] if n in _NOAUTH else n for n in kinds]
        lines.insert_words(header, key, index, names, after=after)
        edited += 1
    if not edited:
        raise RecipeError(
            "%s has no pipeline that ends in %s's API app (paste.app_factory = %s)"
            % (source, recipe.service, " or ".join(sorted(recipe.api_apps)))
        )
    return noauth


def _check_every_route(text: str, recipe: ServiceRecipe, kinds: set[str], source: str) -> None:
    """Refuse a result where some route reaches the API app without the filters (no pipeline to edit)."""
    routes, _ = PasteGraph(text, source).routes("all")
    for route in routes:
        if route.app.target in recipe.api_apps:
            missing = kinds - {tenancy_kind(f.target) for f in route.filters}
            if missing:
                raise RecipeError(
                    "%s: route %s reaches %s's API without a pipeline the recipe can edit (it would skip %s)"
                    % (source, route.label, recipe.service, ", ".join(sorted(missing)))
                )
