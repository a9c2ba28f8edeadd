"""Which paste sections are tenancy_mw filters, and their options checked without building them.

A section is a tenancy_mw filter when its factory is one of the package's
``paste.filter_factory`` entry points, named as paste accepts it
(``use = egg:tenancy_mw#tenant_path``, or ``Class.factory`` of the filter's
class after ``paste.filter_factory =`` or ``use = call:``, from its module
or a package that exports it: ``tenancy_mw.idempotency:Idempotency.factory``
as well as the entry point's ``tenancy_mw.idempotency.filter:...``).

Its options are checked as the filter checks them when the pipeline
loads: first name, type, choices, bounds, regular expressions and
``admin_cull`` rules, from the filter class's option list; then, when those
pass, the filter is built from them with no application, which runs its
own checks (a ``version_pattern`` matching an empty segment, a
``tenantless_collections`` name that is no path segment, a bad header
name...).  Nothing is opened doing so: ``idempotency`` is built with its
``memory`` store in place of a ``sql`` or ``memcached`` one (the
store's own options are checked by type only), ``tenant_admin`` and
``id_resolver``, which open their databases when built, are not built (their
options are checked by type, and their URL layout as the filter would), and
``oslo_config_*`` keys are left out, so no service config file is read.
``admin_cull``'s ``policy_namespace`` is derived (its policy judged, with
the defaults only) where that namespace is registered, which is in the
service's own Python: run the check there to have it checked; elsewhere
the filter is built without it and the rest checked.  Its ``policy_file``
is read when given as an absolute path; a relative one is found in the
service's configuration directories when the service loads the filter.

    >>> tenancy_kind("egg:tenancy_mw#admin_cull"), tenancy_kind("tenancy_mw.tenants.path_filter:TenantPath.factory")
    ('admin_cull', 'tenant_path')
    >>> tenancy_kind("tenancy_mw.idempotency:Idempotency.factory")
    'idempotency'
    >>> from tenancy_mw.tenants.path_filter import TenantPath
    >>> option_problems(TenantPath, {"strip_tenant": "maybe", "tenant_headr": "X-Tenant"})
    ["strip_tenant = 'maybe' is refused: ...", 'unknown option tenant_headr; known options are: ...']
    >>> option_problems(TenantPath, {"tenant_header": "X Tenant"})
    ["tenant_header = 'X Tenant' is refused: not an HTTP header name"]
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import types
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import TYPE_CHECKING, Any

from oslo_config import cfg

if TYPE_CHECKING:
    from tenancy_mw.core.base import TenancyMiddleware

__all__ = ["AUTHTOKEN", "PASTE_CONTROL_KEYS", "filter_class", "option_problems", "option_value", "tenancy_kind"]

#: keystonemiddleware's ``auth_token`` filter, as paste files name it.
AUTHTOKEN = frozenset({"keystonemiddleware.auth_token:filter_factory", "egg:keystonemiddleware#auth_token"})
#: Keys every tenancy_mw section may carry besides its options (:mod:`tenancy_mw.core.base`).
PASTE_CONTROL_KEYS = ("oslo_config_project", "oslo_config_file", "oslo_config_program")
# Filters that open their databases when built (tenant_admin's registry, id_resolver's cells).
_OPENS_STORES = frozenset({"tenant_admin", "id_resolver"})


@functools.cache
def _entry_points() -> dict[str, str]:
    return {
        entry.name: entry.value
        for entry in metadata.entry_points(group="paste.filter_factory")
        if entry.value.startswith("tenancy_mw.")
    }


def tenancy_kind(target: str) -> str | None:
    """The tenancy_mw filter a factory *target* (:func:`~.graph.normalize_target`) builds, or None.

    The filter's entry point name; *target* is ``egg:tenancy_mw#NAME``, or
    ``module:Class.factory`` of a filter class (see the module documentation).
    """
    points = _entry_points()
    if target.startswith("egg:tenancy_mw#"):
        name = target.partition("#")[2]
        return name if name in points else None
    for name, value in points.items():
        if value == target:
            return name
    module, _, attribute = target.partition(":")
    return _exported_kind(module, attribute) if module.split(".")[0] == "tenancy_mw" else None


@functools.cache
def _exported_kind(module_name: str, attribute: str) -> str | None:
    """The filter whose class *module_name* exports as *attribute*'s owner (``Class.factory``), or None."""
    points = _entry_points()
    candidates = []
    for name, value in points.items():
        home, _, entry_attribute = value.partition(":")
        # Only the filter's module or a package above it: no other module of the package is imported.
        if entry_attribute == attribute and (home == module_name or home.startswith(module_name + ".")):
            candidates.append(name)
    for name in candidates:
        try:
            found: Any = importlib.import_module(module_name)
            for part in attribute.split("."):
                found = getattr(found, part)
            if getattr(found, "__self__", None) is filter_class(name):
                return name
        except ImportError:
            # A missing extra: the module cannot be imported, but it holds this entry point's module.
            return name
        except AttributeError:
            continue
    return None


def filter_class(kind: str) -> type[TenancyMiddleware]:
    """The class of tenancy_mw filter *kind*; raises ImportError (MissingExtra) when it cannot load here.

    >>> filter_class("admin_cull").__name__
    'AdminCull'
    """
    module_name, _, attribute = _entry_points()[kind].partition(":")
    factory = importlib.import_module(module_name)
    for part in attribute.split("."):
        factory = getattr(factory, part)
    return factory.__self__


def _options_by_name(cls: type[TenancyMiddleware]) -> dict[str, cfg.Opt]:
    """Every name an option answers to in a paste section: its own and its deprecated ones."""
    names = {}
    for opt in cls.all_opts():
        names[opt.dest] = opt
        for old in opt.deprecated_opts:
            if old.name:
                names.setdefault(old.name.replace("-", "_"), opt)
    return names


def _convert(opt: cfg.Opt, raw: str) -> Any:
    # A paste value is one string; a multi-valued option keeps it whole, as the filters do.
    return [opt.type(raw)] if opt.multi else opt.type(raw)


def _check_rules(value: list[str]) -> None:
    from tenancy_mw.cull.rules import parse_rules

    parse_rules(value)


def _check_pattern(value: str | None) -> None:
    if value is not None:
        re.compile(value)


def _value_check(kind: str, name: str) -> Callable[[Any], None] | None:
    """Checks a filter makes in ``configure()`` that the option's type does not."""
    if kind == "admin_cull" and name == "rules":
        return _check_rules
    if name.endswith("_pattern"):
        return _check_pattern
    return None


def _layout_problems(cls: type[TenancyMiddleware], values: Mapping[str, str]) -> list[str]:
    """What the URL layout of *values* refuses, as the filter *cls* would build it."""
    from tenancy_mw.tenants.ids import LayoutError, TenantLayout, tenant_layout_opts

    names = [opt.dest for opt in tenant_layout_opts()]
    if not all(option in _options_by_name(cls) for option in names):
        return []
    options = types.SimpleNamespace(**{name: option_value(cls, values, name) for name in names})
    try:
        TenantLayout.from_options(options)
    except LayoutError as exc:
        return ["%s = %r is refused: %s" % (exc.option, exc.value, exc.reason)]
    return []


def _policy_registered(namespace: str) -> bool:
    """Whether a service registers policy defaults as *namespace* in this Python."""
    from importlib.metadata import entry_points

    from tenancy_mw.cull.policy import POLICY_ENTRY_POINT_GROUP

    return any(entry.name == namespace for entry in entry_points(group=POLICY_ENTRY_POINT_GROUP))


def _load_problems(cls: type[TenancyMiddleware], conf: Mapping[str, str]) -> list[str]:
    """What the filter *cls* refuses when built from *conf* (whose types are right); nothing is opened."""
    from tenancy_mw.core.base import ConfigError

    names = _options_by_name(cls)
    # Under their current names (no deprecation log), without oslo_config_*: no config file is read.
    values = {names[key].dest: value for key, value in conf.items() if key in names}
    if cls.opt_group in _OPENS_STORES:
        return _layout_problems(cls, values)
    if cls.opt_group == "idempotency":
        values["backend"] = "memory"  # a sql or memcached store would connect
    if values.get("policy_namespace") and not _policy_registered(values["policy_namespace"]):
        del values["policy_namespace"]  # the service's policy is not installed in this Python
    if values.get("policy_file") and not os.path.isabs(values["policy_file"]):
        del values["policy_file"]  # found in the service's configuration directories, which are not read here
    try:
        built = cls(None, values)  # type: ignore[arg-type]
    except ConfigError as exc:
        # "tenancy_mw tenant_path: option X = 'v' is invalid: why" in this module's words.
        message = re.sub(r"^tenancy_mw \S+: (option )?", "", str(exc))
        return [message.replace(" is invalid: ", " is refused: ", 1)]
    close = getattr(built, "close", None)
    if callable(close):
        close()
    return []


def option_problems(cls: type[TenancyMiddleware], conf: Mapping[str, str]) -> list[str]:
    """What the filter *cls* would refuse in a paste section's options *conf*, one message each.

    See the module documentation for what is checked, and how.
    """
    names = _options_by_name(cls)
    problems = []
    unknown = sorted(set(conf) - set(names) - set(PASTE_CONTROL_KEYS))
    for key, raw in conf.items():
        if key not in names:
            continue
        try:
            value = _convert(names[key], raw)
            check = _value_check(cls.opt_group, names[key].dest)
            if check is not None:
                check(value)
        except (ValueError, TypeError, re.error) as exc:
            problems.append("%s = %r is refused: %s" % (key, raw, " ".join(str(exc).split())))
    if unknown:
        problems.append(
            "unknown option%s %s; known options are: %s"
            % ("s" if len(unknown) > 1 else "", ", ".join(unknown), ", ".join(sorted(o.dest for o in cls.all_opts())))
        )
    return problems or _load_problems(cls, conf)


def option_value(cls: type[TenancyMiddleware], conf: Mapping[str, str], name: str) -> Any:
    """The value option *name* takes from *conf* (or its default); None if the filter has no such option.

    A value the option refuses is None too (:func:`option_problems` reports it).

    >>> cls = filter_class("idempotency")
    >>> option_value(cls, {"keystone_scope": "false"}, "keystone_scope"), option_value(cls, {}, "methods")
    (False, ['POST'])
    """
    names = _options_by_name(cls)
    opt = next((o for o in cls.all_opts() if o.dest == name), None)
    if opt is None:
        return None
    for key, raw in conf.items():
        if names.get(key) is opt:
            try:
                return _convert(opt, raw)
            except (ValueError, TypeError):
                return None
    return opt.default
