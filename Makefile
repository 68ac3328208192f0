# Onceover. `make demo` runs the demo; `make test` runs every check. Both install what
# they need first (a venv with the locked Python packages, the dashboard's npm packages
# and build) and skip whatever is already up to date.

PYTHON ?= python3
UV_VERSION := 0.13.9
UV := .tools/bin/uv
VENV := .venv
# Each phase's time, kept when $ONCEOVER_CI_TIMINGS names a file (.ci/run prints them).
TIMED := scripts/timed
# Never let uv download a Python of its own: the machine's Python is the one checked.
export UV_PYTHON_DOWNLOADS := never

FRONTEND_SOURCES := $(shell find frontend/src -type f -not -name "*.test.*" 2>/dev/null) \
	frontend/index.html frontend/vite.config.ts frontend/tsconfig.json frontend/package.json

.PHONY: help install bytecode frontend lint typecheck vitest jvm-archive test-phases pytest test demo up chaos client clean

help:
	@echo "make demo      start the local stack and run the demo job"
	@echo "make test      lint, type-check and run every test (docs/guides/testing.md)"
	@echo "make up        run the local BigQuery and the backend until Ctrl-C"
	@echo "make chaos     the curated, then 200 random fault schedules against real jobs (long)"
	@echo "make install   only install the Python environment"
	@echo "make frontend  only build the dashboard"
	@echo "make client    regenerate the dashboard's API types from the backend"

$(UV):
	@scripts/preflight.sh python $(PYTHON)
	$(PYTHON) -m venv .tools
	$(TIMED) "install: uv" .tools/bin/python -m pip install --quiet "uv==$(UV_VERSION)"

$(VENV)/.installed: $(UV) pyproject.toml uv.lock
	@scripts/preflight.sh python $(PYTHON)
	$(TIMED) "install: python" $(UV) sync --frozen --all-extras --python $(PYTHON) \
		--compile-bytecode
	@touch $@

install: $(VENV)/.installed

# Every module compiled ahead, the packages' at install (above) and ours here (only what
# changed): where PYTHONDONTWRITEBYTECODE is set no process keeps what it compiles, so each
# of the hundreds a test run starts (Spark's Python daemons, jobs, servers) would compile
# every module it imports, again (docs/guides/testing.md; what it saves, measured:
# docs/journal/test-suite.md).
PROJECT_SOURCES := onceover backend jobs tools tests pyspark_onceover

bytecode: install
	@$(VENV)/bin/python -m compileall -q -j 0 $(PROJECT_SOURCES)

frontend/node_modules/.installed: frontend/package.json frontend/package-lock.json
	@scripts/preflight.sh node
	$(TIMED) "install: npm" sh -c "cd frontend && npm ci --no-audit --no-fund"
	@touch $@

frontend/dist/index.html: frontend/node_modules/.installed $(FRONTEND_SOURCES)
	$(TIMED) "build: dashboard" sh -c "cd frontend && npm run build"

frontend: frontend/dist/index.html

# The single sign-on tests' OpenID Provider (npm's oidc-provider), installed from its lock.
OIDC_PROVIDER := tests/helpers/oidc_provider
$(OIDC_PROVIDER)/node_modules/.installed: $(OIDC_PROVIDER)/package.json $(OIDC_PROVIDER)/package-lock.json
	@scripts/preflight.sh node
	$(TIMED) "install: npm (test OpenID Provider)" sh -c "cd $(OIDC_PROVIDER) && npm ci --no-audit --no-fund"
	@touch $@

lint: install
	$(TIMED) "lint: ruff" sh -c "$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check ."

typecheck: install
	$(TIMED) "type-check: mypy" $(VENV)/bin/mypy

# The dashboard's component tests (Vitest, jsdom); its type-check runs in the build.
vitest: frontend/node_modules/.installed
	$(TIMED) vitest sh -c "cd frontend && npm test"

# The tiers whose tests start commands and JVMs run on two pytest-xdist workers: a job
# keeps about one of the two cores busy, so two at a time keep the machine busy. The
# control plane's tests (no JVM, no timing) run on two workers too, and so do the
# in-process tiers (each worker its own local BigQuery and Spark session; one process
# leaves a core idle), but for the tests marked `alone`, which time what must not wait
# (an emit, a sub-second stream lifetime) and run afterwards in one process, nothing
# beside them. What each change saved: docs/journal/test-suite.md.
COMMAND_TIERS := jobs or cli or browser
IN_PROCESS := not ($(COMMAND_TIERS) or backend)

# Spark's classes as the tests' JVMs load them, archived once so each later JVM maps them
# instead of loading and verifying them again (tools/onceover_tools/jvm_archive.py);
# rebuilt when the Python, PySpark or Java changed, skipped with a message if it cannot
# be built.
JVM_CLASS_ARCHIVE := .onceover/jvm/spark-classes.jsa

jvm-archive: bytecode
	@scripts/preflight.sh java
	$(TIMED) "build: JVM class archive" $(VENV)/bin/python -m onceover_tools.jvm_archive \
		$(JVM_CLASS_ARCHIVE)

# The tests alone, once what they need is built (`make pytest` builds it first).
test-phases: bytecode frontend $(OIDC_PROVIDER)/node_modules/.installed
	@scripts/preflight.sh java
	@scripts/ensure-chromium.sh
	@scripts/ensure-docker-compose.sh
	@scripts/ensure-s3fs.sh
	@scripts/ensure-prometheus.sh
	$(TIMED) "pytest: in process, 2 workers" $(VENV)/bin/pytest -m "$(IN_PROCESS) and not alone" \
		-n 2 --dist worksteal
	$(TIMED) "pytest: in process, alone" $(VENV)/bin/pytest -m "$(IN_PROCESS) and alone"
	$(TIMED) "pytest: backend, 2 workers" $(VENV)/bin/pytest -m backend -n 2 --dist worksteal
	$(TIMED) "pytest: commands, 2 workers" $(VENV)/bin/pytest -m "$(COMMAND_TIERS)" \
		-n 2 --dist worksteal

pytest: jvm-archive
	@$(MAKE) --no-print-directory test-phases

# mypy keeps one core busy and the archive's job about one: side by side, with the
# dashboard's build, they take the time of the longest rather than of all three.
test: lint vitest
	@$(MAKE) --no-print-directory -j 2 --output-sync=target typecheck jvm-archive frontend
	@$(MAKE) --no-print-directory test-phases

demo: bytecode frontend
	$(VENV)/bin/onceover demo

up: bytecode frontend
	$(VENV)/bin/onceover up

chaos: jvm-archive frontend
	ONCEOVER_JVM_CLASS_ARCHIVE=$(CURDIR)/$(JVM_CLASS_ARCHIVE) $(VENV)/bin/onceover chaos --curated
	ONCEOVER_JVM_CLASS_ARCHIVE=$(CURDIR)/$(JVM_CLASS_ARCHIVE) \
		$(VENV)/bin/onceover chaos --schedules 200 --seed 1

client: install frontend/node_modules/.installed
	scripts/generate-client.sh

clean:
	rm -rf $(VENV) .tools frontend/node_modules frontend/dist .onceover test-artifacts
