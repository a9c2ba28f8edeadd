"""The base every tenancy_mw filter is built on.

:class:`TenancyMiddleware` extends oslo.middleware's
``ConfigurableMiddleware`` with four things its filters all need:

- **Options declared once.**  A filter lists its ``oslo_config`` options in
  ``opts`` and names its group in ``opt_group``; the same names and types are
  read from a paste ``[filter:x]`` section, from a ``dict`` given in Python,
  or from an oslo.config ``ConfigOpts`` (the ``[opt_group]`` section of the
  service's config file).  ``opts.py`` lists them for
  ``oslo-config-generator``.
- **Validated at start-up.**  Every option is read and checked when the
  filter is built, which is when the pipeline loads; a bad value raises
  :class:`ConfigError` naming the filter, the option and the value.  An
  unknown key in a paste section is an error too (it is usually a typo).
- **Per-instance values.**  Values from a paste section or a ``dict`` are
  converted by the option's own type and kept on the instance; they are
  never written into the shared ``ConfigOpts``, so two copies of one filter
  in two pipelines (a public and an admin endpoint) keep their own settings.
- **Plain WSGI on the hot path.**  Subclasses implement ``__call__(environ,
  start_response)`` directly; no webob object is built for a request the
  filter only looks at.  :meth:`TenancyMiddleware.error` answers in the
  shared JSON error shape (:mod:`tenancy_mw.core.errors`), and
  :meth:`TenancyMiddleware.answer` renders a :class:`~tenancy_mw.core.errors.Refusal`
  a helper raised.

**Options over their lifetime.**  A renamed option keeps its old name
(``deprecated_name`` / ``deprecated_opts``) in a paste section as it does in
an oslo.config file, with a deprecation warning in the log; an option
marked ``deprecated_for_removal`` logs one too.  :meth:`TenancyMiddleware.set_defaults`
changes a filter's defaults for the whole process (each filter module
offers it as ``set_defaults``), and :meth:`TenancyMiddleware.list_opts` gives
copies of its options for its own ``oslo.config.opts`` namespace.

Options a paste section may also carry, as in oslo.middleware:
``oslo_config_project`` (and ``oslo_config_file``, ``oslo_config_program``)
to read the service's own config files; without them the global
``oslo_config.cfg.CONF`` is used.  Of the paste ``[DEFAULT]`` section only
these ``oslo_config_*`` keys are taken.

A filter, in outline::

    >>> class Shout(TenancyMiddleware):
    ...     opt_group = "shout"
    ...     opts = [cfg.BoolOpt("loud", default=True, help="Shout.")]
    ...
    ...     def configure(self, options):
    ...         self.loud = options.loud
    ...
    ...     def __call__(self, environ, start_response):
    ...         return self.application(environ, start_response)
    >>> Shout(None, {"loud": "false"}).loud        # plain Python
    False
    >>> Shout.set_defaults(loud=False)             # the service's own default
    >>> Shout(None, {}).loud
    False
    >>> Shout.set_defaults(lound=True)
    Traceback (most recent call last):
    ...
    tenancy_mw.core.base.ConfigError: tenancy_mw shout: set_defaults() got unknown option lound; ...

and in ``api-paste.ini``, ``[filter:shout]`` with ``use = egg:pkg#shout``
and ``loud = false``.
"""

from __future__ import annotations

import copy
import logging
import types
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from oslo_config import cfg
from oslo_middleware import base as oslo_base

from tenancy_mw.core import errors
from tenancy_mw.core.microversions import Microversions, add_headers

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

    from tenancy_mw.core.paths import PathRefused

    class _ConfigurableMiddleware:
        """What the filters use of oslo's ``ConfigurableMiddleware``, for the type checker.

        oslo types its ``__call__`` as a webob ``wsgify``; these filters are
        plain WSGI callables, which it would call an incompatible override.
        """

        application: WSGIApplication
        conf: dict[str, Any]
        oslo_conf: cfg.ConfigOpts

        def __init__(self, application: WSGIApplication, conf: dict | cfg.ConfigOpts | None = None) -> None: ...

else:
    _ConfigurableMiddleware = oslo_base.ConfigurableMiddleware

__all__ = ["ConfigError", "TenancyMiddleware", "COMMON_OPTS"]

#: Options every filter has, in its own group.
COMMON_OPTS: list[cfg.Opt] = [
    cfg.StrOpt(
        "error_format",
        default="api-wg",
        choices=[
            ("api-wg", 'OpenStack API-WG errors guideline: {"errors": [...]}'),
            ("nova", 'nova\'s legacy fault body: {"badRequest": {"code", "message"}}'),
        ],
        help="Shape of the JSON error bodies this filter sends, to match the wrapped service's own.",
    ),
    cfg.StrOpt(
        "microversions",
        default="",
        help="The wrapped service's microversions, so this filter's error answers carry the version headers "
        "the service's own answers carry: VERSION_SEGMENT SERVICE_TYPE MIN MAX [LEGACY_HEADER], e.g. "
        "'v2.1 compute 2.1 2.95 X-OpenStack-Nova-API-Version'. An answer under that version segment names the "
        "version the request asks for (MIN when none, MAX for latest) in OpenStack-API-Version and the legacy "
        "header, with Vary on them; for a version the service cannot serve, Vary alone. Empty: no version headers.",
    ),
]

_PASTE_CONTROL_KEYS = ("oslo_config_project", "oslo_config_file", "oslo_config_program")

# The logger keeps its 0.1 name, which operators route on (doc/configuration.rst).
LOG = logging.getLogger("tenancy_mw.base")


class ConfigError(ValueError):
    """A filter option with a bad value, found while the pipeline loads."""


class TenancyMiddleware(_ConfigurableMiddleware):
    """Base class of the tenancy_mw filters; see the module documentation.

    Subclasses set :attr:`opt_group` and :attr:`opts`, implement
    :meth:`configure` and ``__call__(environ, start_response)``.
    """

    #: The oslo.config group of this filter's options, also its paste name.
    opt_group: ClassVar[str] = ""
    #: This filter's own options; :data:`COMMON_OPTS` are added to them.
    opts: ClassVar[list[cfg.Opt]] = []
    #: This filter's own copy of :data:`COMMON_OPTS`, so its defaults are its own.
    common_opts: ClassVar[list[cfg.Opt]] = []

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.common_opts = copy.deepcopy(list(COMMON_OPTS))

    @classmethod
    def all_opts(cls) -> list[cfg.Opt]:
        """This filter's options, the common ones included (the objects it registers)."""
        return list(cls.common_opts) + list(cls.opts)

    @classmethod
    def list_opts(cls) -> list[tuple[str, list[cfg.Opt]]]:
        """``[(group, [opts])]`` for this filter alone, as ``oslo-config-generator`` expects.

        The options are copies: whatever a caller does to them leaves the
        filter's own untouched.  Each filter module exposes this as its
        ``list_opts``, the target of its ``oslo.config.opts`` namespace
        ``tenancy_mw.<filter>``.
        """
        return [(cls.opt_group, copy.deepcopy(cls.all_opts()))]

    @classmethod
    def set_defaults(cls, **defaults: Any) -> None:
        """Change this filter's option defaults for the whole process.

        For a service that wants its own defaults (say ``error_format =
        "nova"``) without writing them into every ``api-paste.ini``; call it
        before the pipeline loads.  A value set in a paste section or config
        file still wins.  Unknown names and values the option's type refuses
        raise :class:`ConfigError`, and then no default changes.  Each filter
        module exposes this as its ``set_defaults``.
        """
        by_name = {opt.dest: opt for opt in cls.all_opts()}
        unknown = sorted(set(defaults) - set(by_name))
        if unknown:
            raise ConfigError(
                "tenancy_mw %s: set_defaults() got unknown option%s %s; known options are: %s"
                % (cls.opt_group, "s" if len(unknown) > 1 else "", ", ".join(unknown), ", ".join(sorted(by_name)))
            )
        for name, value in defaults.items():
            opt = by_name[name]
            try:
                if opt.multi and value is not None:
                    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
                        raise TypeError("a multi-valued option takes a list")
                    for item in value:
                        opt.type(item)
                elif value is not None:
                    opt.type(value)
            except (ValueError, TypeError) as exc:
                raise ConfigError(
                    "tenancy_mw %s: set_defaults(%s=%r) is invalid: %s" % (cls.opt_group, name, value, exc)
                ) from None
        for name, value in defaults.items():
            by_name[name].default = value

    @classmethod
    def factory(cls, global_conf: dict | None, **local_conf: Any) -> Callable:
        """``paste.filter_factory`` entry point.

        Takes the ``[filter:x]`` keys as options; from ``[DEFAULT]`` only the
        ``oslo_config_*`` keys.
        """
        conf = {k: v for k, v in (global_conf or {}).items() if k in _PASTE_CONTROL_KEYS}
        conf.update(local_conf)

        def _filter(app: Callable) -> TenancyMiddleware:
            return cls(app, conf)

        return _filter

    def __init__(self, application: WSGIApplication, conf: dict | cfg.ConfigOpts | None = None) -> None:
        super().__init__(application, conf)
        group = self.opt_group
        all_opts = self.all_opts()
        try:
            self.oslo_conf.register_opts(all_opts, group=group)
        except cfg.DuplicateOptError as exc:
            raise ConfigError("tenancy_mw %s: %s" % (group, exc)) from None
        known = {opt.dest for opt in all_opts}
        self._take_deprecated_names(all_opts, known)
        unknown = sorted(set(self.conf) - known - set(_PASTE_CONTROL_KEYS))
        if unknown:
            raise ConfigError(
                "tenancy_mw %s: unknown option%s %s; known options are: %s"
                % (group, "s" if len(unknown) > 1 else "", ", ".join(unknown), ", ".join(sorted(known)))
            )
        values = {}
        for opt in all_opts:
            values[opt.dest] = self._option_value(opt)
        #: The option values this instance runs with, by name.
        self.options = types.SimpleNamespace(**values)
        self.error_format = self.options.error_format
        #: The service's microversions, for the version headers of this filter's errors (``None``: none).
        self.microversions = self._microversions(self.options.microversions)
        self.configure(self.options)

    def _microversions(self, value: str) -> Microversions | None:
        """The ``microversions`` option parsed; :class:`ConfigError` naming it when it cannot be."""
        if not value or not value.strip():
            return None
        try:
            return Microversions.parse(value)
        except ValueError as exc:
            raise self.config_error("microversions", value, str(exc)) from None

    def _take_deprecated_names(self, all_opts: Iterable[cfg.Opt], known: set[str]) -> None:
        """Read a paste/dict key under an option's old name as the option, logging a deprecation.

        A ``ConfigOpts`` handles its own deprecated names (``self.conf`` is
        empty then).
        """
        group = self.opt_group
        for opt in all_opts:
            for old in opt.deprecated_opts:
                old_name = (old.name or "").replace("-", "_")
                if not old_name or old_name in known or old_name not in self.conf:
                    continue
                if opt.dest in self.conf:
                    raise ConfigError(
                        "tenancy_mw %s: options %s and its deprecated name %s are both set; keep only %s"
                        % (group, opt.dest, old_name, opt.dest)
                    )
                LOG.warning(
                    'tenancy_mw %s: option "%s" is deprecated; use option "%s" instead.',
                    group,
                    old_name,
                    opt.dest,
                )
                self.conf = dict(self.conf)
                self.conf[opt.dest] = self.conf.pop(old_name)
            if opt.deprecated_for_removal and opt.dest in self.conf:
                LOG.warning(
                    'tenancy_mw %s: option "%s" is deprecated for removal%s%s',
                    group,
                    opt.dest,
                    " since %s" % opt.deprecated_since if opt.deprecated_since else "",
                    " (%s)." % opt.deprecated_reason if opt.deprecated_reason else ".",
                )

    def _option_value(self, opt: cfg.Opt) -> Any:
        group = self.opt_group
        if opt.dest in self.conf:
            raw = self.conf[opt.dest]
            if opt.multi and isinstance(raw, str):
                # A paste value is one string; a multi-valued option keeps it whole.
                raw = [raw]
            try:
                if raw is None:
                    return None
                if opt.multi:
                    return [opt.type(item) for item in raw]
                return opt.type(raw)
            except (ValueError, TypeError) as exc:
                raise ConfigError(
                    "tenancy_mw %s: option %s = %r is invalid: %s" % (group, opt.dest, raw, exc)
                ) from None
        try:
            return getattr(getattr(self.oslo_conf, group), opt.dest)
        except (cfg.Error, ValueError) as exc:
            raise ConfigError(
                "tenancy_mw %s: option %s in the [%s] config section is invalid: %s" % (group, opt.dest, group, exc)
            ) from None

    def configure(self, options: types.SimpleNamespace) -> None:
        """Check and prepare the option values; raise :class:`ConfigError` on a bad one.

        Called once, from ``__init__``, with every option already converted
        to its type.  The default does nothing.
        """

    def config_error(self, option: str, value: Any, reason: str) -> ConfigError:
        """A :class:`ConfigError` naming this filter, *option* and *value*."""
        return ConfigError("tenancy_mw %s: option %s = %r is invalid: %s" % (self.opt_group, option, value, reason))

    def error(
        self,
        environ: dict,
        start_response: Callable,
        status: int,
        code: str,
        detail: str,
        headers: tuple = (),
    ) -> list[bytes]:
        """Answer with a JSON error in this filter's ``error_format`` (and its ``microversions``' headers)."""
        return errors.render_error(
            environ,
            start_response,
            status,
            code,
            detail,
            error_format=self.error_format,
            headers=self.answer_headers(environ, headers),
        )

    def answer(self, environ: dict, start_response: Callable, refusal: errors.Refusal) -> list[bytes]:
        """Answer with *refusal* (a :class:`~tenancy_mw.core.errors.Refusal` caught at the top), in ``error_format``."""
        return self.error(environ, start_response, refusal.status, refusal.code, refusal.detail, refusal.headers)

    def refuse_path(self, environ: dict, start_response: Callable, refused: PathRefused) -> list[bytes]:
        """Answer a request whose path has no canonical form: *refused*'s status, ``tenancy.bad-path.<rule>``."""
        return errors.render_path_refusal(
            environ,
            start_response,
            refused,
            error_format=self.error_format,
            headers=self.answer_headers(environ, ()),
        )

    def answer_headers(self, environ: dict, headers: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
        """*headers* of an error answer, with the service's version headers and ``Vary`` when ``microversions`` is set.

        Every answer of this filter goes through here (:meth:`error`, :meth:`answer`,
        :meth:`refuse_path`): so a filter's answer under a microversioned mount says the version the
        service would have served the request at, as the service's own answers do
        (:mod:`tenancy_mw.core.microversions`).
        """
        if self.microversions is None:
            return tuple(headers)
        return add_headers(headers, self.microversions.answer_headers(environ))

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """Pass the request on; subclasses override this with their plain-WSGI work."""
        return self.application(environ, start_response)
