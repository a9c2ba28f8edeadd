# The two set-up commands of README.rst, plus the bench and the sample config.
# Each target makes its own virtualenv in $(VENV); nothing is installed system-wide
# except the Debian packages the tests need (memcached), and only when run as root.

PYTHON ?= python3
# A Python X.Y interpreter that runs: `pythonX.Y` on PATH, else one pyenv
# installed but has not enabled (its shim on PATH then refuses to run).
FIND_PYTHON = $(firstword $(foreach p,$(shell command -v python$(1) 2>/dev/null) \
  $(sort $(wildcard $(HOME)/.pyenv/versions/$(1).*/bin/python$(1))),$(if $(shell $(p) -c 'print(1)' 2>/dev/null),$(p))))
# So `make test PYTHON=python3.12` works wherever a Python 3.12 is installed.
ifneq ($(filter python3.%,$(PYTHON)),)
ifeq ($(shell $(PYTHON) -c 'print(1)' 2>/dev/null),)
override PYTHON := $(or $(call FIND_PYTHON,$(patsubst python%,%,$(PYTHON))),$(PYTHON))
endif
endif
# Bytecode is written (into __pycache__/, which git, the sdist and the tests leave
# out): with PYTHONDONTWRITEBYTECODE set, as some shells have it, every process the
# tests start with their environment (the demo's and the filters' gunicorn workers,
# scripts, pytest itself) compiled the library anew.  (The OpenStack services get an
# environment of their own, without it.)
unexport PYTHONDONTWRITEBYTECODE
VENV ?= .venv
# Absolute, so VENV=/some/where works for every target, from any folder.
BIN := $(abspath $(VENV))/bin
DEMO_HOST ?= 127.0.0.1
DEMO_PORT ?= 8774
DEMO_ADMIN_PORT ?= 8775
# Programs the test suite starts for real: "command:debian-package".
TEST_PROGRAMS := memcached:memcached wrk:wrk node:nodejs
# The load run of `make bench` drives gunicorn with wrk (bench/load.py).
BENCH_PROGRAMS := wrk:wrk

.PHONY: demo test lint format bench bench-tags genconfig programs services clean venv

# --- virtualenv: one per $(VENV), made by $(PYTHON) --------------------------
# The stamps carry the interpreter's tag, and a $(VENV) whose interpreter is not
# $(PYTHON) (same version and installation) is made anew: so
# `make test PYTHON=python3.12` never reuses a .venv of another Python.
PY_IDENTITY := import sys; print(sys.implementation.cache_tag, sys.base_prefix)
PYTHON_ID := $(shell $(PYTHON) -c '$(PY_IDENTITY)' 2>/dev/null)
PY_TAG := $(firstword $(PYTHON_ID))
STAMP := $(BIN)/.installed-$(PY_TAG)
PIP_INSTALL := $(BIN)/python -m pip install --quiet -c constraints.txt

define ensure_venv
	@test -n "$(PY_TAG)" || { echo "PYTHON=$(PYTHON) does not run" >&2; exit 1; }
	@if [ "$$($(BIN)/python -c '$(PY_IDENTITY)' 2>/dev/null)" != "$(PYTHON_ID)" ]; then \
	  echo "making $(VENV) with $(PYTHON) ($(PYTHON_ID))"; \
	  rm -rf $(abspath $(VENV)) && $(PYTHON) -m venv $(abspath $(VENV)) \
	  && $(BIN)/python -m pip install --quiet --upgrade pip; \
	fi
endef

# `make venv`: just the virtualenv, made (anew when needed) by $(PYTHON).
venv:
	$(ensure_venv)

$(STAMP)-demo: setup.cfg setup.py pyproject.toml constraints.txt Makefile
	$(ensure_venv)
	$(PIP_INSTALL) -e '.[demo]'
	touch $@

# Tests run the linters and build the docs, so they get those extras too.
$(STAMP)-test: setup.cfg setup.py pyproject.toml constraints.txt Makefile
	$(ensure_venv)
	$(PIP_INSTALL) -e '.[demo,test,lint,docs]'
	touch $@ $(STAMP)-lint $(STAMP)-docs

# Lint needs only the package (with its feature extras, for mypy) and its linters,
# not the test install.
$(STAMP)-lint: setup.cfg setup.py pyproject.toml constraints.txt Makefile
	$(ensure_venv)
	$(PIP_INSTALL) -e '.[sql,lint]'
	touch $@

# The docs document (autodoc, show-options) the SQL-backed parts too: the sql extra.
$(STAMP)-docs: setup.cfg setup.py pyproject.toml constraints.txt Makefile
	$(ensure_venv)
	$(PIP_INSTALL) -e '.[sql,docs]'
	touch $@

demo: $(STAMP)-demo
	@DEMO_HOST=$(DEMO_HOST) DEMO_PORT=$(DEMO_PORT) DEMO_ADMIN_PORT=$(DEMO_ADMIN_PORT) examples/run-demo $(BIN)

programs:
	@for entry in $(TEST_PROGRAMS); do \
	  prog=$${entry%%:*}; pkg=$${entry#*:}; \
	  if command -v $$prog >/dev/null 2>&1 || test -x /usr/bin/$$prog; then continue; fi; \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian package $$pkg (for $$prog)"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$pkg >/dev/null) \
	      || { echo "could not install $$pkg" >&2; exit 1; }; \
	  else \
	    echo "$$prog is missing: install it (Debian: sudo apt-get install $$pkg); tests that need it will skip, or fail under CI=true" >&2; \
	  fi; \
	done

# Keystone, nova and cinder from PyPI for tests/openstack/ and bench/nova.py, in a virtualenv of
# their own (openstack-constraints.txt), cached in $(TENANCY_MW_CACHE) (~/.cache/tenancy_mw) and
# built only when missing: a minute or two once, nothing after (tests/support/openstack.py).
.PHONY: openstack-venv
openstack-venv: $(STAMP)-test
	@$(BIN)/python -m tests.support.openstack venv

# The database servers of the SQL tests: started when installed but stopped.
services:
	@bash .ci/ensure-services

LINT_PATHS := $(wildcard tenancy_mw tests examples bench doc/conf.py releasenotes/source/conf.py)

lint: $(STAMP)-lint
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/mypy

format: $(STAMP)-lint
	$(BIN)/ruff format $(LINT_PATHS)

test: $(STAMP)-test programs services openstack-venv
	@$(MAKE) --no-print-directory programs TEST_PROGRAMS='$(DOC_PROGRAMS) $(BROWSER_PROGRAMS)'
	@$(MAKE) --no-print-directory test-suites CHECKS="test-lint test-docs-check"

# The suites side by side, each its own pytest run, in three lines:
# 1. the main Python's `slow` tests of $(SERVER_TESTS) (the demo and the filters
#    behind real gunicorn servers: mostly waiting on them);
# 2. its other `slow` tests but the OpenStack ones (PostgreSQL and MariaDB
#    variants, fresh virtualenvs and builds, the bench's runs), then, whatever
#    their result, the OpenStack tests (tests/openstack/: services that keep about
#    one core busy);
# 3. niced, $(CHECKS) (`make test`: the lint and the docs check), the main Python's
#    other tests and each other Python's suite without the slow tests (its
#    virtualenv installed first, not niced).
# The slow tests take two lines because much of their time is spent waiting on
# servers: in one line they set the end of `make test`.  Niced, the CPU-bound runs
# leave the servers of the first two lines their timeouts; bench/load.py's load
# run (wrk against gunicorn) is slow, so it never runs niced (niced beside the
# OpenStack services, its servers once went 10 s without an answer).  Each run
# prints whole when it ends (--output-sync); a failing one says so in a
# "make test:" line, and the others still run (-k; the OpenStack tests also after
# failed slow tests).  Here PYTEST_ARGS takes options only: every run gets them, so
# a path there would run in each (`make test-main PYTEST_ARGS=path` runs it once).
SERVER_TESTS := tests/functional
FAST_SUITES = test-main-fast $(addprefix test-python,$(OTHER_PYTHONS))
SUITES = test-main-servers test-main-slow-then-openstack $(CHECKS) $(FAST_SUITES)
NICE ?= nice -n 10
# Handed to sub-makes in MAKEFLAGS only: in the environment it would reach the
# `make test-suites` that tests/project/test_makefile.py runs inside these suites.
unexport CHECKS
.PHONY: test-suites test-main-servers test-main-slow test-main-fast test-main-slow-then-openstack test-main-openstack
# One job slot for each run.
test-suites:
	@$(MAKE) --no-print-directory -k -j$(words $(SUITES)) --output-sync=target $(SUITES) \
	  || { echo "make test: failed (see the \"make test:\" lines above)" >&2; exit 1; }

# One run of the main Python's slow tests: $(call slow-run,N,WHAT,NAME) runs the
# slow tests of WHAT (paths and options), prints the N slowest, and on failure
# says "make test: NAME on pythonX.Y failed" (WHAT and NAME without commas).
define slow-run
@$(BIN)/python -m pytest -m slow -q --durations=$(1) $(PYTEST_ARGS) $(2) \
  || { echo "make test: $(3) on python$(PY_VERSION) failed" >&2; exit 1; }
endef

test-main-servers: $(STAMP)-test
	$(call slow-run,20,$(SERVER_TESTS),the slow tests of $(SERVER_TESTS))

test-main-slow: $(STAMP)-test
	$(call slow-run,20,--ignore=tests/openstack --ignore=$(SERVER_TESTS),the other slow tests)

test-main-slow-then-openstack: $(STAMP)-test
	@status=0; \
	$(MAKE) --no-print-directory test-main-slow || status=1; \
	$(MAKE) --no-print-directory test-main-openstack || status=1; \
	exit $$status

# The lint and the docs check as `make test` runs them (niced like the suites):
# named in a "make test:" line when they fail.
.PHONY: test-lint test-docs-check
test-lint:
	@$(NICE) $(MAKE) --no-print-directory lint || { echo "make test: the lint failed" >&2; exit 1; }

test-docs-check:
	@$(NICE) $(MAKE) --no-print-directory docs-check || { echo "make test: the docs check failed" >&2; exit 1; }

test-main-openstack: $(STAMP)-test
	$(call slow-run,10,tests/openstack,the OpenStack tests)

test-main-fast: pytest-fast

# The whole suite on $(PYTHON), in one run.
.PHONY: test-main
test-main: $(STAMP)-test
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# --- every Python the package claims ----------------------------------------
# setup.cfg's classifiers and python_requires name exactly TESTED_PYTHONS
# (tests/project/test_shipping.py checks it).  `make test` runs the whole suite on
# $(PYTHON) and, on each other one, in its own $(VENV)-pyX.Y, the suite
# without the tests marked `slow` (servers, fresh virtualenvs, PostgreSQL and
# MariaDB variants: tests/conftest.py, which do not depend on the Python
# version), so CI stays under 20 minutes.  Each is found on PATH or among pyenv's installed versions; a
# missing one fails under CI=true and is reported otherwise.
TESTED_PYTHONS := 3.11 3.12 3.13
PY_VERSION := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
OTHER_PYTHONS := $(filter-out $(PY_VERSION),$(TESTED_PYTHONS))

.PHONY: test-pythons $(addprefix test-python,$(TESTED_PYTHONS))
test-pythons: programs services
	@$(MAKE) --no-print-directory -j2 --output-sync=target $(addprefix test-python,$(OTHER_PYTHONS))

$(addprefix test-python,$(TESTED_PYTHONS)): test-python%:
	@python="$(call FIND_PYTHON,$*)"; \
	if [ -z "$$python" ]; then \
	  case "$$CI" in 1|true|yes) echo "python$* is required under CI=true (setup.cfg claims it)" >&2; exit 1;; esac; \
	  echo "python$* is missing: the suite did not run on it" >&2; exit 0; \
	fi; \
	$(MAKE) --no-print-directory pytest-fast PYTHON="$$python" VENV=$(abspath $(VENV))-py$*

# The test install of each other Python, in its own $(VENV)-pyX.Y (a missing
# Python is reported by its test-pythonX.Y).
.PHONY: venv-pythons $(addprefix venv-python,$(TESTED_PYTHONS)) install-test
venv-pythons: $(addprefix venv-python,$(OTHER_PYTHONS))

$(addprefix venv-python,$(TESTED_PYTHONS)): venv-python%:
	@python="$(call FIND_PYTHON,$*)"; \
	if [ -n "$$python" ]; then \
	  $(MAKE) --no-print-directory install-test PYTHON="$$python" VENV=$(abspath $(VENV))-py$*; \
	fi

install-test: $(STAMP)-test

# The suite without the `slow` tests, in $(VENV) made by $(PYTHON).
.PHONY: pytest-fast
pytest-fast: $(STAMP)-test
	@$(NICE) $(BIN)/python -m pytest -m 'not slow' -q $(PYTEST_ARGS) \
	  || { echo "make test: the tests not marked slow on python$(PY_VERSION) failed" >&2; exit 1; }

# The in-process table, then the load run (gunicorn + wrk, a few minutes), then the filters'
# share of nova-api's own CPU per request (bench/nova.py, a few minutes more).
bench: $(STAMP)-test
	@$(MAKE) --no-print-directory programs TEST_PROGRAMS='$(BENCH_PROGRAMS)'
	$(BIN)/python bench/run.py
	$(BIN)/python bench/load.py $(BENCH_LOAD_ARGS)
	@$(MAKE) --no-print-directory openstack-venv
	$(BIN)/python bench/nova.py $(BENCH_NOVA_ARGS)

# Tag filtering in SQL at a million resources, on PostgreSQL and MariaDB
# (bench/README.rst). Loads its data once (a few minutes), then reuses it.
# Not part of `make test`.
bench-tags: $(STAMP)-test services
	$(BIN)/python bench/tags.py $(BENCH_TAGS_ARGS)

genconfig: $(STAMP)-lint
	$(BIN)/oslo-config-generator --config-file doc/config-generator.conf

# Everything .gitignore names: what the builds, the tests, the demo and the bytecode wrote.
clean:
	rm -rf $(abspath $(VENV)) $(abspath $(VENV))-py* .pytest_cache .hypothesis .mypy_cache .ruff_cache .tox build dist *.egg-info \
	  doc/build releasenotes/build .coverage cover examples/state examples/*.sqlite
	find . -path ./.git -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +

# --- docs, release notes, coverage (tox.ini runs these same targets) ----------
# Debian programs the docs need: graphviz draws doc/pipeline.dot; Chromium
# looks at the built pages (docs-check).  Installed as TEST_PROGRAMS are.
DOC_PROGRAMS := dot:graphviz
BROWSER_PROGRAMS := chromium:chromium
SPHINX_BUILD = $(BIN)/sphinx-build -W --keep-going -q
# The pages docs-check opens: the index and one filter page.
DOCS_CHECK_PAGES := index.html tenant_path.html openapi.html demo-openapi.html

.PHONY: docs docs-check releasenotes cover

docs: $(STAMP)-docs
	@$(MAKE) --no-print-directory programs TEST_PROGRAMS='$(DOC_PROGRAMS)'
	$(SPHINX_BUILD) -E -b html -d doc/build/doctrees doc doc/build/html

docs-check: docs
	@$(MAKE) --no-print-directory programs TEST_PROGRAMS='$(BROWSER_PROGRAMS)'
	$(BIN)/python -m tests.support.browser doc/build/html $(DOCS_CHECK_PAGES)

releasenotes: $(STAMP)-docs
	$(SPHINX_BUILD) -a -E -b html -d releasenotes/build/doctrees releasenotes/source releasenotes/build/html

cover: $(STAMP)-test programs services
	$(BIN)/python -m coverage run -m pytest $(PYTEST_ARGS)
	$(BIN)/python -m coverage report
	$(BIN)/python -m coverage html -d cover
