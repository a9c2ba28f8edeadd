"""demo_compute: a tiny compute-style JSON service behind the tenancy_mw filters.

It shows what a service gets from ``tenant_path``: the tenant id, decoded,
in ``environ['tenancy.tenant_id']``, and nothing for the client to forge.
Servers live per tenant under ``/v2.1/{project_id}/servers``; one tenant
never sees another's.

- :mod:`demo_compute.app`: the WSGI app and its ``paste.app_factory``;
- :mod:`demo_compute.router`: its URL map (the Routes library);
- :mod:`demo_compute.config`: its settings (``tenancy_mw_demo.conf``, oslo.config);
- :mod:`demo_compute.storage`: the ``servers`` table (SQLAlchemy Core),
  on SQLite, PostgreSQL or MariaDB/MySQL;
- :mod:`demo_compute.cells`, :mod:`demo_compute.cells_api`: ``os-services``
  and ``os-hypervisors`` over two cell databases, behind ``id_resolver``.

Run it with ``make demo`` from the repository root; ``examples/README.rst``
tells more.
"""

__all__ = ["API_VERSION"]

#: The one API version this demo serves.
API_VERSION = "v2.1"
