# agentrl: the two set-up commands are `make demo` (main job) and `make test` (tests).
# Both create .venv and install what they need on a fresh machine with python3 and make.

PYTHON ?= python3
VENV ?= .venv
# CPU-friendly default: this exact pin is served from local disk on the build machines; a bare
# `torch` would pull a multi-GB CUDA build. Override, e.g. `make test TORCH_SPEC='torch>=2.4'`.
TORCH_SPEC ?= torch==2.13.0
EXTRAS ?= all
BIN := $(VENV)/bin
STAMP := $(VENV)/.agentrl-installed
PYTEST_ARGS ?=
# `make demo` replaces its earlier results in runs/demo (the generated games are reused).
DEMO_ARGS ?= --overwrite

.PHONY: install demo test test-slow lint typecheck bench clean

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/agentrl demo $(DEMO_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples

typecheck: $(STAMP)
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/python -m pytest -m "not slow and not live" $(PYTEST_ARGS)

test-slow: $(STAMP)
	$(BIN)/python -m pytest -m "slow and not live" $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
