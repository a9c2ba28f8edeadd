# The two set-up commands of README.rst, plus the bench and the sample config.
# Each target makes its own virtualenv in $(VENV); nothing is installed system-wide
# except the Debian packages the tests need (memcached), and only when run as root.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_HOST ?= 127.0.0.1
DEMO_PORT ?= 8774
DEMO_ADMIN_PORT ?= 8775
# Programs the test suite starts for real: "command:debian-package".
TEST_PROGRAMS := memcached:memcached

.PHONY: demo test lint bench bench-tags genconfig programs services clean

$(BIN)/.installed-demo: setup.cfg setup.py constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[demo]'
	touch $@

$(BIN)/.installed-test: setup.cfg setup.py constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[demo,test]'
	touch $@

demo: $(BIN)/.installed-demo
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

# The database servers of the SQL tests: started when installed but stopped.
services:
	@bash .ci/ensure-services

lint: $(BIN)/.installed-test
	$(BIN)/ruff check $(wildcard tenancy_mw tests examples bench)

test: $(BIN)/.installed-test programs services lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(BIN)/.installed-test
	$(BIN)/python bench/run.py

# Tag filtering in SQL at a million resources, on PostgreSQL and MariaDB
# (bench/README.rst). Loads its data once (a few minutes), then reuses it.
# Not part of `make test`.
bench-tags: $(BIN)/.installed-test services
	$(BIN)/python bench/tags.py $(BENCH_TAGS_ARGS)

genconfig: $(BIN)/.installed-test
	$(BIN)/oslo-config-generator --config-file doc/config-generator.conf

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
