"""``idempotency``: exactly-once ``POST`` with a client token, across workers and hosts.

A client that lost its connection retries a ``POST`` with the same
``X-Client-Token`` (or IETF ``Idempotency-Key``) and gets the first
answer again instead of creating a second server.  See ``doc/idempotency.rst``.

Modules:

- :mod:`tenancy_mw.idempotency.tokens`: parse and check a token header (pure);
- :mod:`tenancy_mw.idempotency.fingerprint`: the request fingerprint (pure);
- :mod:`tenancy_mw.idempotency.records`: store keys and signed JSON records (pure);
- :mod:`tenancy_mw.idempotency.stores`: the ``memory`` and ``memcached`` stores;
- :mod:`tenancy_mw.idempotency.sql_store`: the ``sql`` store and its table;
- :mod:`tenancy_mw.idempotency.filter`: the WSGI filter,
  :class:`~tenancy_mw.idempotency.filter.Idempotency`;
- :mod:`tenancy_mw.idempotency.manage`: ``tenancy-mw-manage idempotency purge``.

The pure modules import no WSGI machinery; this package file imports
nothing, so ``from tenancy_mw.idempotency.tokens import parse_token`` stays
light.  ``from tenancy_mw.idempotency import Idempotency`` loads the filter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from oslo_config import cfg

__all__ = ["Idempotency", "list_opts", "set_defaults"]


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """Copies of this filter's options: the ``tenancy_mw.idempotency`` ``oslo.config.opts`` namespace."""
    from tenancy_mw.idempotency.filter import Idempotency

    return Idempotency.list_opts()


def set_defaults(**defaults: Any) -> None:
    """Change this filter's defaults for the process (see :meth:`.TenancyMiddleware.set_defaults`).

    Example::

        >>> set_defaults(expiration=3600)
        >>> from tenancy_mw.idempotency.filter import Idempotency
        >>> [opt.default for opt in Idempotency.all_opts() if opt.dest == "expiration"]
        [3600]
        >>> set_defaults(expiration=86400)
    """
    from tenancy_mw.idempotency.filter import Idempotency

    Idempotency.set_defaults(**defaults)


def __getattr__(name: str) -> Any:
    # The filter pulls in oslo.middleware; load it only when asked for.
    if name == "Idempotency":
        from tenancy_mw.idempotency.filter import Idempotency

        return Idempotency
    raise AttributeError(name)
