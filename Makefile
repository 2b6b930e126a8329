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

# The `local` extra builds llama-cpp-python from source the first time (~6 min on 2 cores); pip caches the wheel.
$(VENV)/.installed: pyproject.toml | $(PY)
	$(PIP) install -q -e '.[local]'
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(PY)
	$(PIP) install -q -e '.[dev,local]'
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
