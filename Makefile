# Two commands: `make book` (build the site) and `make test` (everything CI checks).
# Needs only Python 3.11 and pip; `make test` also installs Debian's chromium if missing.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.mlbook-installed
SITE   := _build/html
CACHE  := _build/.jupyter_cache
CHROMIUM ?= /usr/bin/chromium
SHOT_ELEMENT ?= fig-pe-heatmap-base-figure
# Build the site's notebooks in static mode: figures need no kernel, no network.
MLBOOK_STATIC_BUILD_ENV := MLBOOK_STATIC=1

# pytest exit status 5 means "no tests collected": not a failure for an optional suite.
define pytest_allow_empty
	rc=0; $(1) || rc=$$?; if [ $$rc -eq 5 ]; then echo "(no tests collected)"; elif [ $$rc -ne 0 ]; then exit $$rc; fi
endef

.PHONY: help venv book test test-lib test-notebooks site-strict test-browser chromium screenshot cache-check clean

help:
	@echo "make book   create .venv, install, execute every notebook, build the site into $(SITE)"
	@echo "make test   library tests, nbval over every notebook, strict site build, browser check"

# --- environment -------------------------------------------------------------------
# Rebuilt when requirements.txt or pyproject.toml change (make compares timestamps).
$(STAMP): requirements.txt pyproject.toml
	@test -n "$(PYTHON)" || { echo "error: python3.11 (or python3) not found"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -r requirements.txt
	$(BIN)/python -m pip install -e '.[test]'
	@touch $@

venv: $(STAMP)

# Executed notebooks are cached by their code; outputs also depend on the library,
# so the cache is dropped whenever src/, requirements.txt or pyproject.toml change.
cache-check:
	@h=$$(cat requirements.txt pyproject.toml $$(find src -name '*.py' -not -path '*/__pycache__/*' | sort) | sha256sum | cut -c1-16); \
	if [ "$$(cat _build/.mlbook-src-hash 2>/dev/null)" != "$$h" ]; then \
	  echo "library or requirements changed: notebooks will be executed afresh"; \
	  rm -rf $(CACHE); mkdir -p _build; echo "$$h" > _build/.mlbook-src-hash; \
	fi

# --- the site ----------------------------------------------------------------------
book: $(STAMP) cache-check
	$(MLBOOK_STATIC_BUILD_ENV) $(BIN)/jupyter-book build --all .
	@echo
	@echo "Built. Open file://$(CURDIR)/$(SITE)/index.html"
	@echo "or serve it: $(BIN)/python -m http.server -d $(SITE) 8000  ->  http://127.0.0.1:8000"

# Warnings are errors (-W), nitpicky references (-n); --all re-reads every page so
# no warning hides in an incremental build (executed notebooks come from the cache).
site-strict: $(STAMP) cache-check
	$(MLBOOK_STATIC_BUILD_ENV) $(BIN)/jupyter-book build --all . -W -n --keep-going

# --- tests -------------------------------------------------------------------------
test-lib: $(STAMP)
	$(call pytest_allow_empty,$(BIN)/python -m pytest tests -m "not browser")

test-notebooks: $(STAMP)
	$(call pytest_allow_empty,$(BIN)/python -m pytest --nbval-lax --nbval-current-env --nbval-cell-timeout=300 -p no:cacheprovider notebooks/)

test-browser: $(STAMP) chromium
	MLBOOK_CHROMIUM=$(CHROMIUM) $(BIN)/python -m pytest tests/test_site.py -m browser -s -p no:cacheprovider

test: test-lib test-notebooks site-strict test-browser

chromium:
	@if [ -x "$(CHROMIUM)" ]; then exit 0; fi; \
	echo "Installing Debian's chromium (for the browser check)"; \
	if [ "$$(id -u)" -eq 0 ]; then SUDO=; \
	elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then SUDO=sudo; \
	else echo "error: $(CHROMIUM) is missing and installing it needs root: run 'sudo apt-get install -y chromium chromium-driver'"; exit 1; fi; \
	$$SUDO apt-get update; \
	DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y --no-install-recommends chromium chromium-driver; \
	test -x "$(CHROMIUM)" || { echo "error: apt-get did not provide $(CHROMIUM)"; exit 1; }

# README screenshot of the built site (after `make book`), through the browser-test client.
screenshot: $(STAMP) chromium
	@test -f $(SITE)/notebooks/02_sinusoidal.html || { echo "run 'make book' first"; exit 1; }
	MLBOOK_CHROMIUM=$(CHROMIUM) $(BIN)/python tests/test_site.py screenshot \
	  notebooks/02_sinusoidal.html $(SHOT_ELEMENT) book/_static/screenshot.png

clean:
	rm -rf _build
