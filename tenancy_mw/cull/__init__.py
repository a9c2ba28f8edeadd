"""Admin-only calls refused on public endpoints.

The ``admin_cull`` filter, its rule language and its method-override scanner.
"""
