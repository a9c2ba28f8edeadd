"""Tenants: where the tenant is, who they are, and their admin API.

The URL layout decision and tenant ids (pure), the ``tenant_path``
filter, the tenant registry, the ``tenant_admin`` filter and its moves,
and the ``tenants`` console verbs.
"""
