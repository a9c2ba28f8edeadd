"""The routes of a paste file: from each entry point, through composites and pipelines, to an app.

A **route** is one way a request can go: the entry point (a section no
other section names, such as nova's ``[composite:osapi_compute]``), the
branches taken (a urlmap path, a pipeline_factory key), the filters in the
order they run, and the app.  Sections are read as paste.deploy reads them,
without importing anything they name: a filter or an app is known by its
factory (``paste.filter_factory = mod:attr``, ``use = egg:dist#name``,
``use = call:mod:attr``; a ``use`` naming another section inherits its
factory and options).

``filter-with = NAME`` on an app, a composite or a filter (also when
inherited through ``use``) wraps it in filter ``NAME``: on a route, that
filter runs just before the section.  On a pipeline or a filter-app paste
builds a filter instead of an app, which fails every request: a problem.

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
    "Pass",
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
# Keys naming the factory of a section without "use" (loadwsgi's egg_protocols).
_FACTORY_KEYS = (
    "paste.app_factory",
    "paste.composite_factory",
    "paste.composit_factory",
    "paste.filter_factory",
    "paste.filter_app_factory",
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
# An entry point's value as importlib reads it: "module : attr [extras]", spaces allowed.
_ENTRY_POINT = re.compile(r"^(?P<module>[\w.]+)\s*:\s*(?P<attr>[\w.]+)\s*(\[.*\])?$")


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
    #: The filters ``filter-with`` wraps it in, its own then inherited ones: the order a request meets them.
    wrappers: tuple[str, ...] = field(default=(), hash=False, compare=False)


@dataclass(frozen=True)
class Pass:
    """A route's way through one pipeline: a ``[pipeline:...]`` (*key* ``pipeline``) or a composite's key."""

    header: str
    key: str
    #: For each word of the pipeline, the index in the route's filters where its filters begin
    #: (its ``filter-with`` ones first); the last is where the app's begin.
    starts: tuple[int, ...]


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
    #: The pipelines the route goes through, outermost first.
    passes: tuple[Pass, ...] = ()

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
    >>> normalize_target("tenancy_mw.cull.filter :AdminCull.factory [sql]")
    'tenancy_mw.cull.filter:AdminCull.factory'
    """
    value = value.strip()
    if value.lower().startswith("egg:"):
        spec, _, name = value[4:].partition("#")
        dist = re.split(r"[\[<>=!~ ]", spec, maxsplit=1)[0].lower().replace("-", "_")
        return "egg:%s#%s" % (dist, name.strip() or "main")
    if value.lower().startswith("call:"):
        value = value[5:].strip()
    entry = _ENTRY_POINT.match(value)
    return "%s:%s" % (entry.group("module"), entry.group("attr")) if entry else value


class PasteGraph:
    """A paste file's sections and the routes through them (read with :func:`~.ini.read_config`)."""

    def __init__(self, text: str, source: str = "api-paste.ini") -> None:
        self.config = read_config(text, source)
        #: Values paste could not interpolate (``%`` not written ``%%``).
        self.value_problems: list[Problem] = []
        #: Names that lead nowhere, found so far (reading ``use``, following routes).
        self.problems: list[Problem] = []
        #: ``use`` chains that come back to a section (paste recurses until it fails); also in problems.
        self.use_loops: list[Problem] = []
        # Sections built so far; a section built for another's "use" is built once.
        self._built: dict[str, Section] = {}
        headers = []
        for header in self.config.sections():
            prefix, _, name = header.partition(":")
            if _KINDS.get(prefix.strip()) and name.strip():
                headers.append(header)
                self._section(header, ())
        self.sections: dict[str, Section] = {header: self._built[header] for header in headers}

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

    def _section(self, header: str, chain: tuple[str, ...]) -> Section:
        """Build *header*'s section; *chain* holds the sections whose ``use`` led here (to stop a loop)."""
        built = self._built.get(header)
        if built is not None:
            return built
        prefix, _, name = header.partition(":")
        kind, name = _KINDS[prefix.strip()], name.strip()
        raw = self._local_conf(header)
        conf = {k: v for k, v in raw.items() if k not in _PROTOCOL_KEYS}
        wrapper = raw.get("filter-with", "").strip()
        own = (wrapper,) if wrapper else ()
        section = Section(kind, name, header, "", conf, raw, own)
        use = raw.get("use", "").strip()
        if use and not _SCHEME.match(use):
            # "use = other_section": that section's factory and options, overridden by ours.
            base = self._find(use, "filter" if kind in ("filter", "filter-app") else "app", "[%s]" % header)
            path = chain + (header,)
            if base in path:
                loop = path[path.index(base) :] + (base,)
                message = "use = %s loops: %s" % (use, " > ".join("[%s]" % h for h in loop))
                self.use_loops.append(Problem("[%s]" % header, message))
                self.problems.append(self.use_loops[-1])
            elif base is not None:
                inherited = self._section(base, path)
                merged = {**inherited.conf, **conf}
                section = Section(kind, name, header, inherited.target, merged, raw, own + inherited.wrappers)
        elif use:
            section = Section(kind, name, header, normalize_target(use), conf, raw, own)
        else:
            for key in _FACTORY_KEYS:
                if key in raw:
                    section = Section(kind, name, header, normalize_target(raw[key]), conf, raw, own)
        self._built[header] = section
        return section

    def _find(self, name: str, role: str, where: str) -> str | None:
        """The header of the section named *name* in *role* (``app`` or ``filter``); None (and a problem)."""
        kinds = _APP_KINDS if role == "app" else ("filter",)
        found = []
        for header in self.config.sections():
            prefix, _, section_name = header.partition(":")
            if _KINDS.get(prefix.strip()) in kinds and section_name.strip() == name:
                found.append(header)
        if len(found) == 1:
            return found[0]
        message = "names %s %r, which %s" % (
            "an app" if role == "app" else "a filter",
            name,
            "is ambiguous: %s" % ", ".join("[%s]" % h for h in found) if found else "has no section",
        )
        self.problems.append(Problem(where, message))
        return None

    def lookup(self, name: str, role: str, where: str) -> Section | None:
        """The section paste loads for *name* used as an ``app`` or a ``filter``; None (and a problem) if none."""
        if _SCHEME.match(name):
            # egg:/call:/config: used directly in a pipeline: known by that spec alone.
            return Section(role, name, name, normalize_target(name), {}, {})
        header = self._find(name, role, where)
        return self._section(header, ()) if header is not None else None

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
        roots = self.roots()
        for root in roots:
            found.extend(self._walk(root, (), (), auth_strategy, frozenset(), ()))
        app_like = [s for s in self.sections.values() if s.kind in _APP_KINDS]
        if app_like and not roots and not self.use_loops:
            message = "no section is an entry point (each is named by another): loading any of them loops"
            self.problems.append(Problem("[%s]" % app_like[0].header, message))
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
        passes: tuple[Pass, ...],
    ) -> Iterator[Route]:
        if section.header in seen:
            self.problems.append(Problem(" > ".join(hops), "loops back to [%s]" % section.header))
            return
        seen = seen | {section.header}
        here = hops + (section.name,)
        if section.kind in ("pipeline", "filter-app") and section.wrappers or len(section.wrappers) > 1:
            # loadwsgi's _FilterWith wraps only an app's context as an app; anything else becomes a filter.
            message = (
                "has filter-with = %s, which paste applies as an app's filter only to an app or a composite "
                "(not to a pipeline, a filter-app, nor over the filter-with of the section its use names): "
                "it builds a filter there, and every request through it fails" % section.wrappers[0]
            )
            self.problems.append(Problem("[%s]" % section.header, message))
            return
        filters += self.wrapping(section, " > ".join(here))
        if section.kind == "app":
            root = (hops[0] if hops else section.name).split("[")[0]
            yield Route(root, hops, filters, section, passes)
        elif section.kind == "pipeline":
            names = section.raw.get("pipeline", "").split()
            yield from self._chain(names, here, filters, strategy, seen, passes, (section.header, "pipeline"))
        elif section.kind == "filter-app":
            following = self.lookup(section.raw.get("next", "").strip(), "app", " > ".join(here))
            if following is not None:
                yield from self._walk(following, here, filters + (section,), strategy, seen, passes)
        else:
            urlmap = self.is_urlmap(section)
            for key, names in self.branches(section, strategy):
                hop = hops + ("%s[%s]" % (section.name, key),)
                step = None if urlmap else (section.header, key)
                yield from self._chain(names, hop, filters, strategy, seen, passes, step)

    def _chain(
        self,
        names: list[str],
        hops: tuple[str, ...],
        filters: tuple[Section, ...],
        strategy: str,
        seen: frozenset[str],
        passes: tuple[Pass, ...],
        step: tuple[str, str] | None,
    ) -> Iterator[Route]:
        """Follow a pipeline (*step*: its header and key): filters, then the app (or pipeline, or composite)."""
        where = " > ".join(hops)
        if not names:
            self.problems.append(Problem(where, "names no app"))
            return
        added: tuple[Section, ...] = ()
        starts = []
        complete = True
        for name in names[:-1]:
            starts.append(len(filters) + len(added))
            section = self.lookup(name, "filter", where)
            if section is None:
                complete = False
            else:
                added += self.wrapping(section, where) + (section,)
        starts.append(len(filters) + len(added))
        app = self.lookup(names[-1], "app", where)
        if app is not None and complete:
            if step is not None:
                passes += (Pass(step[0], step[1], tuple(starts)),)
            yield from self._walk(app, hops, filters + added, strategy, seen, passes)

    def wrapping(self, section: Section, where: str, stack: tuple[str, ...] = ()) -> tuple[Section, ...]:
        """The filters ``filter-with`` runs just before *section*, in the order a request meets them."""
        found: tuple[Section, ...] = ()
        stack += (section.header,)
        for name in section.wrappers:
            wrapper = self.lookup(name, "filter", where)
            if wrapper is None:
                continue
            if wrapper.header in stack:
                self.problems.append(Problem(where, "filter-with = %s loops back to [%s]" % (name, wrapper.header)))
                continue
            # A wrapper's own filter-with runs before it (paste composes them so).
            found += self.wrapping(wrapper, where, stack) + (wrapper,)
        return found
