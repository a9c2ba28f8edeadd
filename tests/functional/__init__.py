"""Functional tests of the demo service in examples/: real databases, real gunicorn."""
