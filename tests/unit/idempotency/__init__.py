"""Unit tests of tenancy_mw.idempotency."""
