"""The core every capability stands on.

The filter base class, errors, canonical paths, request bodies and SQL
helpers.
"""
