"""tenancy_mw: paste-deployable WSGI filters for multi-tenant OpenStack-style services.

Filters (``paste.filter_factory`` entry points, ``use = egg:tenancy_mw#NAME``):

- ``tenant_path`` (:class:`tenancy_mw.tenant_path.TenantPath`): the tenant id
  from ``/{version}/{tenantId}/...``.
- ``admin_cull`` (:class:`tenancy_mw.admin_cull.AdminCull`): keeps admin
  calls off a public endpoint.
- ``idempotency`` (:class:`tenancy_mw.idempotency.Idempotency`): a retried
  ``POST`` with the same client token runs once.

Pure helpers that import no WSGI machinery live in :mod:`tenancy_mw.paths`
(the canonical form of request paths) and :mod:`tenancy_mw.tenant_ids`
(validate, quote and split tenant ids) and :mod:`tenancy_mw.cull_rules`
(the rule language of ``admin_cull``).
"""

__version__ = "0.1.0"
