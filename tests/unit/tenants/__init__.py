"""Unit tests of tenancy_mw.tenants."""
