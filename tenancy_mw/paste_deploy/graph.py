"""The routes of a paste file: from each entry point, through composites and pipelines, to an app.

A **route** is one way a request can go: the entry point (a section no
other section names, such as nova's ``[composite:osapi_compute]``), the
branches taken (a urlmap path, a pipeline_factory key), the filters in the
order they run, and the app.  Sections are read as paste.deploy reads them,
without importing anything they name: a filter or an app is known by its
factory (``paste.filter_factory = mod:attr``, ``use = egg:dist#name``,
``use = call:mod:attr``; a ``use`` naming another section inherits its
factory and options).

Composites
    - **urlmaps** (``egg:Paste#urlmap``, nova's
      ``nova.api.openstack.urlmap:urlmap_factory``, cinder's
      ``cinder.api:root_app_factory``): each path is a route;
    - **pipeline factories** (nova's ``nova.api.auth:pipeline_factory_v21``,
      cinder's ``cinder.api.middleware.auth:pipeline_factory``): each key is
      an auth strategy, its value a pipeline.  The service runs the one of
      its ``auth_strategy`` (cinder: or ``<strategy>_nolimit`` when
      ``api_rate_limit`` is off), so ``auth_strategy="keystone"`` follows
      ``keystone`` and ``keystone_nolimit``, and ``"all"`` every key.
    - any other composite is read by its shape: keys starting with ``/``
      make a urlmap, otherwise a pipeline factory.

    >>> graph = PasteGraph('''
    ... [composite:main]
    ... use = egg:Paste#urlmap
    ... /v1: api
    ... [pipeline:api]
    ... pipeline = authtoken service
    ... [filter:authtoken]
    ... paste.filter_factory = keystonemiddleware.auth_token:filter_factory
    ... [app:service]
    ... paste.app_factory = service.api:App.factory
    ... ''')
    >>> routes, problems = graph.routes()
    >>> [(r.label, [f.name for f in r.filters], r.app.target) for r in routes]
    [('main[/v1] > api > service', ['authtoken'], 'service.api:App.factory')]
"""

from __future__ import annotations

import configparser
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from tenancy_mw.paste_deploy.ini import read_config

__all__ = [
    "PIPELINE_FACTORIES",
    "URLMAPS",
    "normalize_target",
    "Problem",
    "PasteGraph",
    "Route",
    "Section",
]

#: Composite factories that map URL paths to apps (``paste.urlmap`` and the services' own).
URLMAPS = frozenset(
    {
        "egg:paste#urlmap",
        "paste.urlmap:urlmap_factory",
        "nova.api.openstack.urlmap:urlmap_factory",
        "cinder.api:root_app_factory",
    }
)
#: Composite factories whose keys are auth strategies, each value a pipeline.
PIPELINE_FACTORIES = frozenset(
    {
        "nova.api.auth:pipeline_factory_v21",
        "nova.api.auth:pipeline_factory",
        "cinder.api.middleware.auth:pipeline_factory",
    }
)
# cinder's root_app_factory drops these paths of old files before mapping the rest.
_DROPPED_PATHS = {"cinder.api:root_app_factory": frozenset({"/v1", "/v2"})}
# Keys paste itself reads in a section, never passed to the factory as options.
_PROTOCOL_KEYS = frozenset(
    {
        "use",
        "paste.app_factory",
        "paste.composite_factory",
        "paste.composit_factory",
        "paste.filter_factory",
        "paste.filter_app_factory",
        "filter-with",
        "require",
        "next",
    }
)
_KINDS = {
    "app": "app",
    "application": "app",
    "composite": "composite",
    "composit": "composite",
    "pipeline": "pipeline",
    "filter-app": "filter-app",
    "filter": "filter",
}
# Where paste looks for a name used as an app, and as a filter (loadwsgi's config_prefixes).
_APP_KINDS = ("app", "composite", "pipeline", "filter-app")
_SCHEME = re.compile(r"^[a-z]+:", re.IGNORECASE)


@dataclass(frozen=True)
class Section:
    """One ``[kind:name]`` section, as paste will build it."""

    #: ``app``, ``filter``, ``pipeline``, ``composite`` or ``filter-app``.
    kind: str
    name: str
    #: The section's header, ``filter:authtoken``.
    header: str
    #: The factory: ``mod:attr`` or ``egg:dist#name`` (``""`` for a pipeline).
    target: str
    #: The options paste passes to the factory (inherited ones included).
    conf: dict[str, str] = field(hash=False, compare=False)
    #: Every key of the section as written, ``use`` and the like included.
    raw: dict[str, str] = field(hash=False, compare=False)


@dataclass(frozen=True)
class Route:
    """One way from an entry point to an app; see the module documentation."""

    #: The entry point's section name.
    root: str
    #: The branches taken, ``osapi_compute[/v2/+]``, ``openstack_compute_api_v21[keystone]``.
    hops: tuple[str, ...]
    #: The filters, in the order a request meets them.
    filters: tuple[Section, ...]
    app: Section

    @property
    def label(self) -> str:
        """The route in one line: its hops and the app's name, joined by ``>``."""
        return " > ".join(self.hops + (self.app.name,))


@dataclass(frozen=True)
class Problem:
    """A route that cannot be followed (a missing section, a loop); *where* is the route so far."""

    where: str
    message: str


def normalize_target(value: str) -> str:
    """A factory spec as one comparable string: ``egg:Dist[x]#name`` → ``egg:dist#name``, ``call:`` dropped.

    >>> normalize_target("egg:Tenancy-MW[sql]#tenant_path"), normalize_target("call:nova.api.auth:pipeline_factory_v21")
    ('egg:tenancy_mw#tenant_path', 'nova.api.auth:pipeline_factory_v21')
    """
    value = value.strip()
    if value.lower().startswith("egg:"):
        spec, _, name = value[4:].partition("#")
        dist = re.split(r"[\[<>=!~ ]", spec, maxsplit=1)[0].lower().replace("-", "_")
        return "egg:%s#%s" % (dist, name.strip() or "main")
    if value.lower().startswith("call:"):
        return value[5:].strip()
    return value


class PasteGraph:
    """A paste file's sections and the routes through them (read with :func:`~.ini.read_config`)."""

    def __init__(self, text: str, source: str = "api-paste.ini") -> None:
        self.config = read_config(text, source)
        #: Values paste could not interpolate (``%`` not written ``%%``).
        self.value_problems: list[Problem] = []
        #: Names that lead nowhere, found so far (reading ``use``, following routes).
        self.problems: list[Problem] = []
        self.sections: dict[str, Section] = {}
        for header in self.config.sections():
            prefix, _, name = header.partition(":")
            if _KINDS.get(prefix.strip()) and name.strip():
                self.sections[header] = self._section(header, set())

    def _local_conf(self, header: str) -> dict[str, str]:
        defaults = self.config.defaults()
        conf: dict[str, str] = {}
        for key in self.config.options(header):
            if key.startswith("set ") or (key in defaults and not key.startswith("get ")):
                continue  # paste keeps [DEFAULT] and "set" keys for the global conf
            if key.startswith("get "):
                conf[key[4:].strip()] = defaults.get(self.config.get(header, key), "")
            else:
                try:
                    conf[key] = self.config.get(header, key)
                except configparser.InterpolationError as exc:
                    self.value_problems.append(Problem("[%s]" % header, " ".join(str(exc).split())))
                    conf[key] = self.config.get(header, key, raw=True)
        return conf

    def _section(self, header: str, seen: set[str]) -> Section:
        prefix, _, name = header.partition(":")
        kind, name = _KINDS[prefix.strip()], name.strip()
        raw = self._local_conf(header)
        conf = {k: v for k, v in raw.items() if k not in _PROTOCOL_KEYS}
        target = ""
        use = raw.get("use", "")
        if use and not _SCHEME.match(use) and header not in seen:
            # "use = other_section": that section's factory and options, overridden by ours.
            base = self.lookup(use, "filter" if kind == "filter" else "app", header)
            if base is not None:
                inherited = self._section(base.header, seen | {header})
                return Section(kind, name, header, inherited.target, {**inherited.conf, **conf}, raw)
        elif use:
            target = normalize_target(use)
        else:
            for key in (
                "paste.app_factory",
                "paste.composite_factory",
                "paste.composit_factory",
                "paste.filter_factory",
                "paste.filter_app_factory",
            ):
                if key in raw:
                    target = raw[key].strip()
        return Section(kind, name, header, target, conf, raw)

    def lookup(self, name: str, role: str, where: str) -> Section | None:
        """The section paste loads for *name* used as an ``app`` or a ``filter``; None (and a problem) if none."""
        kinds = _APP_KINDS if role == "app" else ("filter",)
        found = []
        for header in self.config.sections():
            prefix, _, section_name = header.partition(":")
            if _KINDS.get(prefix.strip()) in kinds and section_name.strip() == name:
                found.append(header)
        if len(found) == 1:
            return self.sections.get(found[0]) or self._section(found[0], set())
        if _SCHEME.match(name):
            # egg:/call:/config: used directly in a pipeline: known by that spec alone.
            return Section(role, name, name, normalize_target(name), {}, {})
        message = "names %s %r, which %s" % (
            "an app" if role == "app" else "a filter",
            name,
            "is ambiguous: %s" % ", ".join("[%s]" % h for h in found) if found else "has no section",
        )
        self.problems.append(Problem(where, message))
        return None

    def roots(self) -> list[Section]:
        """The entry points: app-like sections that no other section names."""
        named: set[str] = set()
        for section in self.sections.values():
            if section.kind == "composite":
                named.update(word for value in section.conf.values() for word in value.split())
            named.update(section.raw.get("pipeline", "").split())
            for key in ("next", "use", "filter-with"):
                named.add(section.raw.get(key, "").strip())
        return [s for s in self.sections.values() if s.kind in _APP_KINDS and s.name not in named]

    def routes(self, auth_strategy: str = "keystone") -> tuple[list[Route], list[Problem]]:
        """Every route from every entry point, and the problems met on the way (see the module doc)."""
        found: list[Route] = []
        for root in self.roots():
            found.extend(self._walk(root, (), (), auth_strategy, frozenset()))
        return found, list(dict.fromkeys(self.problems))

    def branches(self, section: Section, auth_strategy: str) -> list[tuple[str, list[str]]]:
        """A composite's branches: ``(key, names)``, *names* one app (urlmap) or a pipeline."""
        keys = list(section.conf)
        if self.is_urlmap(section):
            dropped = _DROPPED_PATHS.get(section.target, frozenset())
            return [(k, [section.conf[k].strip()]) for k in keys if k not in dropped]
        if auth_strategy != "all":
            keys = [k for k in keys if k in (auth_strategy, auth_strategy + "_nolimit")]
            if not keys:
                self.problems.append(
                    Problem(
                        section.name,
                        "has no %r pipeline (its keys: %s)" % (auth_strategy, ", ".join(section.conf) or "none"),
                    )
                )
        return [(k, section.conf[k].split()) for k in keys]

    @staticmethod
    def is_urlmap(section: Section) -> bool:
        """Whether a composite maps paths to apps (see the module documentation)."""
        if section.target in URLMAPS:
            return True
        if section.target in PIPELINE_FACTORIES:
            return False
        return any(k.startswith("/") or k.startswith("domain ") for k in section.conf)

    def _walk(
        self,
        section: Section,
        hops: tuple[str, ...],
        filters: tuple[Section, ...],
        strategy: str,
        seen: frozenset[str],
    ) -> Iterator[Route]:
        if section.header in seen:
            self.problems.append(Problem(" > ".join(hops), "loops back to [%s]" % section.header))
            return
        seen = seen | {section.header}
        if section.kind == "app":
            wrapper = section.raw.get("filter-with")
            wrapped = self._filters([wrapper], " > ".join(hops + (section.name,))) if wrapper else ()
            root = (hops[0] if hops else section.name).split("[")[0]
            yield Route(root, hops, filters + wrapped, section)
        elif section.kind == "pipeline":
            names = section.raw.get("pipeline", "").split()
            yield from self._chain(names, hops + (section.name,), filters, strategy, seen)
        elif section.kind == "filter-app":
            here = hops + (section.name,)
            following = self.lookup(section.raw.get("next", ""), "app", " > ".join(here))
            if following is not None:
                yield from self._walk(following, here, filters + (section,), strategy, seen)
        else:
            for key, names in self.branches(section, strategy):
                yield from self._chain(names, hops + ("%s[%s]" % (section.name, key),), filters, strategy, seen)

    def _chain(
        self,
        names: list[str],
        hops: tuple[str, ...],
        filters: tuple[Section, ...],
        strategy: str,
        seen: frozenset[str],
    ) -> Iterator[Route]:
        """Follow a pipeline: filters, then the app (or pipeline, or composite) it ends in."""
        where = " > ".join(hops)
        if not names:
            self.problems.append(Problem(where, "names no app"))
            return
        added = self._filters(names[:-1], where)
        app = self.lookup(names[-1], "app", where)
        if app is not None and len(added) == len(names) - 1:
            yield from self._walk(app, hops, filters + added, strategy, seen)

    def _filters(self, names: list[str], where: str) -> tuple[Section, ...]:
        found = []
        for name in names:
            section = self.lookup(name, "filter", where)
            if section is not None:
                found.append(section)
        return tuple(found)
