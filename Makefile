# The two commands of the README: `make run` and `make test`. Everything else is optional.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test stress bench bench-quick bench-cluster clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	touch $(STAMP)

# Only what the user set reaches the server: `make run PORT=8080 HOST=0.0.0.0` become flags,
# and the SEED_AGENTS_* variables work as documented (no flag here overrides them).
SERVE_FLAGS := $(if $(HOST),--host $(HOST)) $(if $(PORT),--port $(PORT)) $(if $(DATA_DIR),--data-dir $(DATA_DIR))

run: $(STAMP)
	$(BIN)/seed-agents serve $(SERVE_FLAGS)

test: $(STAMP)
	$(BIN)/python -m pytest -q

stress: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

bench: $(STAMP)
	$(BIN)/python -m bench.run

bench-quick: $(STAMP)
	$(BIN)/python -m bench.run --quick

# Several servers on PostgreSQL (docs/performance.md): needs SEED_AGENTS_TEST_POSTGRES_URL;
# `make bench-cluster PART=b` runs one part.
bench-cluster: $(STAMP)
	$(BIN)/python -m bench.cluster $(if $(PART),--part $(PART))

clean:
	rm -rf $(VENV) build *.egg-info
