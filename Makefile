# The two commands of the README: `make run` and `make test`. Everything else is optional.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# What each target needs, one stamp each: the server alone (`make run`), then the test extras
# (`make test`; the name `.installed` is kept for anyone who runs `make .venv/.installed`), then
# the benchmarks' extras (`make bench`).
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
# uv installs the same pyproject.toml several times faster than pip (docs/operations.md,
# "Installing"); it comes from PyPI through pip, and pip installs everything itself whenever uv
# cannot be had. `make run INSTALLER=pip` skips uv.
INSTALLER ?= uv
comma := ,

.PHONY: run test lint stress bench bench-quick bench-cluster reference-fixture clean

# Without pip: ensurepip alone takes seconds, and uv needs none. pip is added when it is used.
$(BIN)/python:
	$(PYTHON) -m venv --without-pip $(VENV)

ENSURE_PIP = { $(BIN)/python -m pip --version >/dev/null 2>&1 || $(BIN)/python -m ensurepip --upgrade; }
PIP_INSTALL = $(BIN)/python -m pip install --disable-pip-version-check --progress-bar on
# uv into the venv: already there, or by the system's pip (--python: no pip in the venv needed;
# its errors hidden, as a system without pip, or with one older than 22.3, just goes on), or by
# the venv's own pip.
GET_UV = $(BIN)/python -m uv --version >/dev/null 2>&1 \
	|| $(PYTHON) -m pip --python $(BIN)/python install --disable-pip-version-check --progress-bar on 'uv>=0.4' 2>/dev/null \
	|| { $(ENSURE_PIP) && $(PIP_INSTALL) 'uv>=0.4'; }

# $(call install,EXTRAS): this project (editable) with those extras, by uv or else by pip, with
# their progress on screen.
define install
	@echo "installing seed-agents$(1) into $(VENV) ($(INSTALLER))"
	@if [ "$(INSTALLER)" = uv ] && { $(GET_UV); }; then \
	    $(BIN)/python -m uv pip install --python $(BIN)/python -e '.$(1)'; \
	else \
	    $(ENSURE_PIP) && $(PIP_INSTALL) -e '.$(1)'; \
	fi
endef

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	@if [ -f $(STAMP) ] && [ $(STAMP) -nt pyproject.toml ]; then :; else $(MAKE) --no-print-directory install-run; fi
	@touch $(RUN_STAMP)

.PHONY: install-run
install-run: | $(BIN)/python
	$(call install,)

$(STAMP): pyproject.toml | $(BIN)/python
	$(call install,[test])
	@touch $(STAMP)

$(BENCH_STAMP): pyproject.toml $(STAMP)
	$(call install,[test$(comma)bench])
	@touch $(BENCH_STAMP)

# Only what the user set reaches the server: `make run PORT=8080 HOST=0.0.0.0` become flags,
# and the SEED_AGENTS_* variables work as documented (no flag here overrides them). Data goes to
# ./data: the server's default inside a checkout.
SERVE_FLAGS := $(if $(HOST),--host $(HOST)) $(if $(PORT),--port $(PORT)) $(if $(DATA_DIR),--data-dir $(DATA_DIR))

run: $(RUN_STAMP)
	$(BIN)/seed-agents serve $(SERVE_FLAGS)

# Four workers, each test file on one (module fixtures stay in one process); `make test
# TEST_WORKERS=0` runs everything in this process. Four on two cores: the suite's own processes
# use about 390 CPU-seconds (1.6 cores over the 250 s a quiet run took), the rest is waiting on
# servers and deadlines; six ran the slowest, mostly waiting files 14-29% faster, but the whole
# suite has little idle CPU left for them and its timing tests would meet more contention. By the
# files' durations the last file ends within 4% of an even split, so splitting files across
# workers (--dist worksteal) could gain little and would set module fixtures up on several. The
# suite runs with Python's bytecode cache
# on, whatever PYTHONDONTWRITEBYTECODE says (uv installs no bytecode either): it starts hundreds
# of Python processes (servers, the CLI), and without the cache each compiles all it imports
# again (0.4 s of CPU for each CLI command, 0.7 s for each server) and each worker rewrites every
# test file's asserts again. The cache goes to the __pycache__ folders .gitignore lists.
TEST_WORKERS ?= 4
test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

# ruff and mypy alone (docs/architecture.md, "Tooling"); `make test` runs them as part of the suite.
lint: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -p no:cacheprovider tests/repo/test_lint.py

stress: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -m slow

bench: $(BENCH_STAMP)
	$(BIN)/python -m bench.run

bench-quick: $(BENCH_STAMP)
	$(BIN)/python -m bench.run --quick

# Several servers on PostgreSQL (docs/performance.md): needs SEED_AGENTS_TEST_POSTGRES_URL;
# `make bench-cluster PART=b` runs one part.
bench-cluster: $(BENCH_STAMP)
	$(BIN)/python -m bench.cluster $(if $(PART),--part $(PART))

# The reference server's data directory the import is tested on, written by the reference's own
# code under Bun (tests/reference_data/make.sh; needs the npm registry): REF=/path/to/seed-checkout.
reference-fixture:
	tests/reference_data/make.sh $(or $(REF),/work/ref)

clean:
	rm -rf $(VENV) build *.egg-info
