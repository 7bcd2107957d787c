# Two commands: `make book` (build the site) and `make test` (everything CI checks).
# Needs only Python 3.11, pip and git; `make test` also installs Debian's chromium if missing.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.mlbook-installed
SITE   := _build/html
CACHE  := _build/.jupyter_cache
# Experiment records of this build (quick runs): the Colab check writes them, the site build
# reuses them; the committed full-budget records are found in the package (src/mlbook/results).
RESULTS := $(CURDIR)/_build/mlbook-results
# The Colab-like environment of `make colab-check` (tools/colab/requirements*.txt).
COLAB_VENV  := _build/colab-venv
COLAB_STAMP := $(COLAB_VENV)/.mlbook-colab-installed
# Its Python is Colab's: the major.minor in tools/colab/python-version (written with the pins by
# `make colab-requirements` from Colab's os-info.txt). python3.X from PATH if it runs (pyenv's shim
# of a version that is not selected does not), else pyenv's build of it; where there is neither,
# the environment is made with $(PYTHON), and the recipe says so. COLAB_PYTHON=/path/to/python sets it.
COLAB_PYTHON_VERSION := $(shell cat tools/colab/python-version)
PYENV_ROOT ?= $(HOME)/.pyenv
COLAB_PYTHON ?= $(firstword $(foreach p,$(shell command -v python$(COLAB_PYTHON_VERSION)) \
  $(sort $(wildcard $(PYENV_ROOT)/versions/$(COLAB_PYTHON_VERSION).*/bin/python$(COLAB_PYTHON_VERSION))),\
  $(shell $(p) -c 'import sys; print(sys.executable)' 2>/dev/null)))
NOTEBOOKS ?=
# pytest-xdist workers for the library tests (2 cores in CI).
TEST_WORKERS ?= 2
CHROMIUM ?= /usr/bin/chromium
SHOT_ELEMENT ?= fig-pe-heatmap-base-figure
# Build the site's notebooks in static mode: figures need no kernel, no network.
MLBOOK_STATIC_BUILD_ENV := MLBOOK_STATIC=1 MLBOOK_RESULTS=$(RESULTS)
# The venvs are installed without byte-compiling (see below): Python writes the byte-code of what
# it imports on first use. A shell with PYTHONDONTWRITEBYTECODE set (this project's CI machine has
# it) would forbid that, and every kernel and test process then compiled torch again from source
# (about 15 s of CPU each: make test took 20 minutes instead of 13). Not passed on to make's commands.
unexport PYTHONDONTWRITEBYTECODE

# pytest exit status 5 means "no tests collected": not a failure for an optional suite.
define pytest_allow_empty
	rc=0; $(1) || rc=$$?; if [ $$rc -eq 5 ]; then echo "(no tests collected)"; elif [ $$rc -ne 0 ]; then exit $$rc; fi
endef

.PHONY: help venv book test test-lib test-hf4 test-notebooks colab-check colab-check-exact colab-requirements site-strict outputs-check outputs test-browser \
        chromium axe screenshot setup-cells bench bench-lib bench-book cache-check clean lab pdf test-pdf test-speed test-phone \
        site-browser outputs-portability outputs-spread

help:
	@echo "make book         create .venv, install, execute every notebook, build the site into $(SITE)"
	@echo "make test         library tests, the Colab check (nbval over every notebook), strict site build,"
	@echo "                  committed outputs check, browser check"
	@echo "make outputs      re-execute the notebooks as the site build does and write their outputs back"
	@echo "                  into notebooks/*.ipynb (NOTEBOOKS='notebooks/01_x.ipynb ...' for some)"
	@echo "make colab-check  every notebook run as in Colab (NOTEBOOKS='notebooks/01_x.ipynb ...' for some)"
	@echo "make colab-check-exact  the same at Colab's own Python 3.13 and torch 2.11 (not in make test)"
	@echo "make colab-requirements  the Colab check's pins from Colab's pip freeze (FREEZE=path; default the copy"
	@echo "                  in tools/colab/backend-info/)"
	@echo "make test-hf4     the oracle tests against transformers $(HF4_TRANSFORMERS) (the 4.x config layout) in $(HF4_VENV)"
	@echo "make outputs-portability  the committed-outputs check against executions under two other CPUs'"
	@echo "                  arithmetic (ATEN_CPU_CAPABILITY=default, avx2; ~5 min); make outputs-spread after it"
	@echo "make setup-cells  rewrite every notebook's setup cell from the repository URL in _config.yml"
	@echo "make bench        re-measure the committed benchmark records (quiet machine, ~20 min): the library's"
	@echo "                  (make bench-lib) and the book's live-slider redraw times (make bench-book)"
	@echo "make lab          open the notebooks in JupyterLab from .venv, with live sliders (installs .[lab])"
	@echo "make pdf          print the built site (make book first) into one PDF, $(PDF)"

# --- environment -------------------------------------------------------------------
# Rebuilt when requirements.txt or pyproject.toml change (make compares timestamps). Every
# environment is installed by tools/install.py: uv (installed by pip) with pip's own settings, the
# same releases as pip in about a tenth of the time (pip alone if uv cannot be had).
# --no-compile: byte-compiling all 28,000 installed files took ~90 s of pip's 170 s install,
# and Python compiles the few thousand it imports on first use.
INSTALL = tools/install.py
$(STAMP): requirements.txt pyproject.toml
	@test -n "$(PYTHON)" || { echo "error: python3.11 (or python3) not found"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python $(INSTALL) $(VENV) --no-compile -r requirements.txt -e '.[test]'
	@touch $@

venv: $(STAMP)

# --- JupyterLab --------------------------------------------------------------------
# The optional extra `lab` (pyproject.toml) in .venv: the notebooks' kernel is this Python,
# with mlbook, ipywidgets and plotly's JupyterLab extensions. LAB_ARGS='--no-browser --port 8889'.
LAB_STAMP := $(VENV)/.mlbook-lab-installed
LAB_ARGS ?=
$(LAB_STAMP): $(STAMP)
	$(BIN)/python $(INSTALL) $(VENV) -e '.[lab]'
	@touch $@

lab: $(LAB_STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks $$([ "$$(id -u)" -ne 0 ] || echo --allow-root) $(LAB_ARGS)

# Executed notebooks are cached by their code; outputs also depend on the library and on
# the records it ships (the full-budget and benchmark records the pages print), so the cache
# (and this build's experiment records) is dropped whenever src/ (its Python files and those
# records), requirements.txt or pyproject.toml change.
cache-check:
	@h=$$(cat requirements.txt pyproject.toml $$(find src -not -path '*/__pycache__/*' \( -name '*.py' \
	  -o -path 'src/mlbook/results/full/*.json' -o -path 'src/mlbook/results/bench/*.json' \) | sort) \
	  | sha256sum | cut -c1-16); \
	if [ "$$(cat _build/.mlbook-src-hash 2>/dev/null)" != "$$h" ]; then \
	  echo "library or requirements changed: notebooks will be executed afresh"; \
	  rm -rf $(CACHE) $(RESULTS); mkdir -p _build; echo "$$h" > _build/.mlbook-src-hash; \
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
# One torch thread per xdist worker: with torch's default (a thread per core) each of the two
# workers ran two threads on the two cores, and the tiny training runs of the experiment tests
# spent their time waiting on one another (a fixture 30 s instead of 4 s): 6.1 -> 5.1 CPU-minutes.
# (In a fresh clone torch.compile's cache is cold and the worker with test_benchmarks.py, which
# compiles for about two minutes, sets the pace: about 190 s either way; 120 s with a warm cache.)
test-lib: $(STAMP)
	$(call pytest_allow_empty,OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/python -m pytest tests -m "not browser" -n $(TEST_WORKERS) --dist loadfile)

# The 4.x config layout keeps its own oracle: the oracle-marked tests (`-m oracle`: mlbook against
# transformers' own code) in a second environment with transformers $(HF4_TRANSFORMERS), the last 4.x release,
# where .venv has the test extra's. The same install as .venv's (requirements.txt's versions as
# constraints, torch from local disk, the test extra, no jupyter-book), then transformers moved to 4.x;
# installed after .venv (order-only), so the two never build mlbook's editable install at once.
HF4_VENV         := _build/hf4-venv
HF4_STAMP        := $(HF4_VENV)/.mlbook-hf4-installed
HF4_TRANSFORMERS := 4.57.6
$(HF4_STAMP): requirements.txt pyproject.toml | $(STAMP)
	rm -rf $(HF4_VENV)
	$(PYTHON) -m venv $(HF4_VENV)
	$(HF4_VENV)/bin/python $(INSTALL) $(HF4_VENV) -q --no-compile -c requirements.txt -e '.[test]'
	$(HF4_VENV)/bin/python $(INSTALL) $(HF4_VENV) -q --no-compile -c requirements.txt transformers==$(HF4_TRANSFORMERS)
	@touch $@

test-hf4: $(HF4_STAMP)
	$(call pytest_allow_empty,OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(HF4_VENV)/bin/python -m pytest tests \
	  -m "oracle and not browser" -q -p no:cacheprovider)

# nbval in the local .venv: a quick check while writing a notebook (not part of `make test`,
# where nbval runs in the Colab-like environment instead).
test-notebooks: $(STAMP)
	$(call pytest_allow_empty,$(BIN)/python -m pytest --nbval-lax --nbval-current-env --nbval-cell-timeout=300 -p no:cacheprovider notebooks/)

# The Colab check of `make test`: Colab's versions (tools/colab/requirements*.txt: transformers 5.15, numpy
# 2.1, IPython 7.34, ipywidgets 7.7.1, plotly 5.24), no jupyter-book, but $(PYTHON) and torch $(COLAB_TORCH)
# (requirements.txt's, the CPU build from local disk) in place of Colab's Python 3.13 and torch 2.11: the Colab
# check and the site build share this build's quick experiment records, and a record trained under another
# torch build has other numbers than the committed outputs (tried: three experiment pages then failed the
# outputs check). `make colab-check-exact` runs every notebook at Colab's own Python and torch.
COLAB_TORCH ?= 2.13.0
$(COLAB_STAMP): tools/colab/requirements.txt tools/colab/requirements-nodeps.txt
	rm -rf $(COLAB_VENV)
	@test -n "$(PYTHON)" || { echo "error: python3.11 (or python3) not found"; exit 1; }
	$(PYTHON) -m venv $(COLAB_VENV)
	sed 's/^torch==[^ ]*/torch==$(COLAB_TORCH)/' tools/colab/requirements.txt > $(COLAB_VENV)/requirements.txt
	$(COLAB_VENV)/bin/python $(INSTALL) $(COLAB_VENV) -q --no-compile -r $(COLAB_VENV)/requirements.txt
	$(COLAB_VENV)/bin/python $(INSTALL) $(COLAB_VENV) -q --no-compile --no-deps -r tools/colab/requirements-nodeps.txt
	@touch $@

# Colab exactly: its Python (tools/colab/python-version, 3.13) and every pin of tools/colab/requirements*.txt,
# torch 2.11.0 included (PyPI's build, 4.5 GB with CUDA libraries), with experiment records of its own.
# Not in `make test` (it cannot share records with the site build); 2026-12-03: the check passed on all 22 notebooks;
# 2026-12-04: pages 12-15 again after their rewrite (64 passed in 47 s).
COLAB_EXACT_VENV  := _build/colab-exact-venv
COLAB_EXACT_STAMP := $(COLAB_EXACT_VENV)/.mlbook-colab-installed
$(COLAB_EXACT_STAMP): tools/colab/requirements.txt tools/colab/requirements-nodeps.txt tools/colab/python-version
	rm -rf $(COLAB_EXACT_VENV)
	@py='$(COLAB_PYTHON)'; if [ -z "$$py" ]; then py='$(PYTHON)'; \
	  test -n "$$py" || { echo "error: neither python$(COLAB_PYTHON_VERSION) nor python3.11 (or python3) found"; exit 1; }; \
	  echo "note: Colab's Python $(COLAB_PYTHON_VERSION) (tools/colab/python-version) is not on PATH or in $(PYENV_ROOT):" \
	    "the environment uses $$($$py -V) instead (COLAB_PYTHON=/path/to/python$(COLAB_PYTHON_VERSION) to choose one)"; fi; \
	echo "$$py -m venv $(COLAB_EXACT_VENV)   # $$($$py -V)"; "$$py" -m venv $(COLAB_EXACT_VENV)
	$(COLAB_EXACT_VENV)/bin/python $(INSTALL) $(COLAB_EXACT_VENV) -q --no-compile -r tools/colab/requirements.txt
	$(COLAB_EXACT_VENV)/bin/python $(INSTALL) $(COLAB_EXACT_VENV) -q --no-compile --no-deps -r tools/colab/requirements-nodeps.txt
	@touch $@

colab-check-exact: $(STAMP) $(COLAB_EXACT_STAMP)
	rm -rf _build/mlbook-results-exact
	$(BIN)/python tools/colab_check.py --venv $(COLAB_EXACT_VENV) --results $(CURDIR)/_build/mlbook-results-exact \
	  --times _build/colab-exact-times.json $(NOTEBOOKS)

# The Colab check's pins from Colab's published runtime (googlecolab/backend-info; the copy in
# tools/colab/backend-info/): tools/colab/requirements*.txt and python-version, rewritten by
# tools/colab_requirements.py. After copying a newer pip-freeze.txt and os-info.txt there (or with
# FREEZE=path/to/pip-freeze.txt), one command and a diff; TORCH=2.13.0 where Colab's torch cannot be installed.
FREEZE ?= tools/colab/backend-info/pip-freeze.txt
TORCH  ?=
colab-requirements:
	$(PYTHON) tools/colab_requirements.py $(FREEZE) $(if $(TORCH),--torch $(TORCH))
	@git diff --stat -- tools/colab/requirements.txt tools/colab/requirements-nodeps.txt tools/colab/python-version || true

# Every notebook top to bottom as a Colab reader runs it (live mode, working directory
# outside the repository, mlbook installed by the setup cell from a snapshot of this
# working tree): nbval plus tools/colab/nbval_colab.py. See tools/colab_check.py.
colab-check: $(STAMP) $(COLAB_STAMP) cache-check
	$(BIN)/python tools/colab_check.py --venv $(COLAB_VENV) --results $(RESULTS) \
	  --times _build/colab-times.json $(NOTEBOOKS)

# The committed outputs of every notebook are what the current code prints. They are made as
# the site build runs the notebooks (static mode; `make outputs`), so they are compared with
# the site build's own executions, read from its jupyter-cache: nothing runs twice.
# See tools/notebook_outputs.py (the sanitisers for what varies between runs are listed there).
outputs-check: site-strict
	$(BIN)/python tools/notebook_outputs.py check --cache $(CACHE) $(NOTEBOOKS)

# The outputs check against other CPUs' arithmetic, emulated on this machine: every notebook executed
# as the site build does, once per setting below, each with fresh quick records (nothing reused), into
# _build/portability/NAME/, then `notebook_outputs.py check --executed` on each. A setting caps torch's
# kernels (ATEN_CPU_CAPABILITY), MKL's (MKL_ENABLE_INSTRUCTIONS), oneDNN's (ONEDNN_MAX_CPU_ISA), numpy's SIMD loops
# (NPY_DISABLE_CPU_FEATURES) and numpy's OpenBLAS kernels (OPENBLAS_CORETYPE) at one instruction
# set: `default` an x86-64-v2 machine (SSE4.2), `avx2` an AVX2 one (Haswell, Zen 2). The two run side
# by side on the two cores (about 5 minutes); not part of `make test`. `make outputs-spread` then
# prints how much each cell's numbers moved (what tools/colab/cpu_bounds.py's bounds are set from).
PORTABILITY := _build/portability
PORTABILITY_ENV_default := ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 ONEDNN_MAX_CPU_ISA=SSE41 \
  NPY_DISABLE_CPU_FEATURES="X86_V3 X86_V4 AVX512_ICL AVX512_SPR" OPENBLAS_CORETYPE=Nehalem
PORTABILITY_ENV_avx2 := ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 \
  NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL AVX512_SPR" OPENBLAS_CORETYPE=Haswell
PORTABILITY_SETTINGS := default avx2

outputs-portability: $(STAMP)
	rm -rf $(PORTABILITY); mkdir -p $(PORTABILITY)
	pids=(); for s in $(PORTABILITY_SETTINGS); do \
	  case $$s in default) envs='$(PORTABILITY_ENV_default)';; avx2) envs='$(PORTABILITY_ENV_avx2)';; \
	    *) echo "error: PORTABILITY_SETTINGS: unknown setting '$$s' (allowed: default avx2)"; exit 2;; esac; \
	  echo "[portability] $$s: $$envs"; \
	  ( eval "export $$envs"; $(BIN)/python tools/notebook_outputs.py execute --out $(PORTABILITY)/$$s $(NOTEBOOKS) \
	    > $(PORTABILITY)/$$s.log 2>&1 ) & pids+=($$!); \
	done; rc=0; for p in "$${pids[@]}"; do wait $$p || rc=1; done; \
	grep -h '^\[outputs\]' $(PORTABILITY)/*.log; \
	for s in $(PORTABILITY_SETTINGS); do echo "[portability] the committed outputs against the $$s run:"; \
	  $(BIN)/python tools/notebook_outputs.py check --executed $(PORTABILITY)/$$s $(NOTEBOOKS) || rc=1; done; \
	exit $$rc

outputs-spread: $(STAMP)
	$(BIN)/python tools/notebook_outputs.py spread $(foreach s,$(PORTABILITY_SETTINGS),--executed $(PORTABILITY)/$(s)) $(NOTEBOOKS)

# Re-execute the notebooks (NOTEBOOKS='notebooks/01_x.ipynb ...' for some) exactly as the site
# build does (static mode, one torch thread, this build's quick experiment records, the
# full-budget records shipped in src/mlbook/results/full/) and write their outputs back into
# notebooks/*.ipynb. Cells whose outputs differ only in what the check ignores (timings, dates)
# keep the committed ones, so an unchanged notebook's file stays byte-identical.
outputs: $(STAMP) cache-check
	$(BIN)/python tools/notebook_outputs.py refresh --results $(RESULTS) $(NOTEBOOKS)

# axe-core (the accessibility audit in tests/test_site.py's page test) from the npm registry, pinned;
# installed once under _build/axe, read from disk by the browser test: nothing fetched at run time.
AXE_VERSION := 4.14.1
AXE_JS      := _build/axe/node_modules/axe-core/axe.min.js
$(AXE_JS):
	@command -v npm >/dev/null || { [ "$$(id -u)" -eq 0 ] && apt-get update && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y --no-install-recommends npm; } || { echo "error: npm is missing: apt-get install -y npm"; exit 1; }
	npm install --no-audit --no-fund --no-save --prefix _build/axe axe-core@$(AXE_VERSION)
	@test -f $@

axe: $(AXE_JS)

# Every page once, all checks in that load (tests/test_site.py), every page with figures again
# at a phone's width (tests/test_site_a11y.py, screenshots in _build/phone/), and the site's slider
# steps against plotly's (tests/test_slider_steps.py), spread over
# BROWSER_WORKERS xdist workers (each with its own Chromium: much of a page's time is waiting on
# the browser); then each page's load time, weight and clicks from _build/browser-report/.
BROWSER_WORKERS ?= 2
test-browser: $(STAMP) chromium axe
	rm -rf _build/browser-report
	MLBOOK_CHROMIUM=$(CHROMIUM) MLBOOK_AXE=$(CURDIR)/$(AXE_JS) $(BIN)/python -m pytest tests/test_site.py \
	  tests/test_site_a11y.py tests/test_slider_steps.py -m "browser and not speed" -n $(BROWSER_WORKERS) -p no:cacheprovider
	@cat _build/browser-report/*.txt 2>/dev/null | sort

# Every figure at 390 px: no text boxes overlap (screenshots in _build/phone/); also part of test-browser.
test-phone: $(STAMP) chromium
	MLBOOK_CHROMIUM=$(CHROMIUM) $(BIN)/python -m pytest tests/test_site_a11y.py -m phone -s -p no:cacheprovider

# Static slider steps timed in the browser (median under 100 ms each): on a quiet machine, after `make book`.
test-speed: $(STAMP) chromium
	MLBOOK_CHROMIUM=$(CHROMIUM) $(BIN)/python -m pytest tests/test_site.py -m speed -s -p no:cacheprovider

# Each notebook runs twice, once per reader path: live in the Colab check, static in the site build.
# On 2 cores: the two virtual environments are installed side by side, and the library tests
# run as soon as .venv is ready (beside the Colab one if it is still installing); then the Colab
# check and the site build run side by side, one torch thread each. They share this build's quick
# experiment records: the Colab check takes the slowest notebooks first (tools/colab/times.json)
# while the site build takes them from the first, so each slow experiment is trained by one and
# loaded by the other (where both reach one at once, the second waits for the first's record). The committed outputs
# are compared with the site build's executions (outputs-check, after site-strict), and the
# browser check starts on the finished site while the Colab check is still running (site-browser).
# The 4.x layout's oracle (test-hf4: its environment, then about 20 s of tests) goes beside the library
# tests: about 40 s of one core from nothing, about 20 s of the run on two. -O keeps each job's output whole.
test:
	$(MAKE) --no-print-directory -j2 -O test-lib $(COLAB_STAMP) test-hf4
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(MAKE) --no-print-directory -j2 -O colab-check site-browser

# The strict site build, the outputs check on its executions, then the browser check of that site.
site-browser: outputs-check
	$(MAKE) --no-print-directory test-browser

# --- the PDF edition ---------------------------------------------------------------
# Every page of the built site printed by Debian's chromium (print media, maths typeset, figures
# at their default state, code and outputs) and merged by pypdf, bookmarks and links between
# pages included: tools/pdf_book.py. No TeX. Not in `make test` (its 15-minute budget): `make pdf test-pdf`.
PDF       := _build/pdf/book.pdf
PDF_STAMP := $(VENV)/.mlbook-pdf-installed
$(PDF_STAMP): $(STAMP)
	$(BIN)/python $(INSTALL) $(VENV) -e '.[pdf]'
	@touch $@

pdf: $(PDF_STAMP) chromium
	@test -f $(SITE)/index.html || { echo "run 'make book' first"; exit 1; }
	$(BIN)/python tools/pdf_book.py --site $(SITE) --out $(PDF) --chromium $(CHROMIUM)

# The PDF's page count, bookmarks, every page's title and typeset maths (tests/test_pdf.py).
test-pdf: $(PDF_STAMP)
	MLBOOK_PDF=$(PDF) MLBOOK_SITE=$(SITE) $(BIN)/python -m pytest tests/test_pdf.py -m browser -p no:cacheprovider

chromium:
	@if [ -x "$(CHROMIUM)" ]; then exit 0; fi; \
	echo "Installing Debian's chromium (for the browser check)"; \
	if [ "$$(id -u)" -eq 0 ]; then SUDO=; \
	elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then SUDO=sudo; \
	else echo "error: $(CHROMIUM) is missing and installing it needs root: run 'sudo apt-get install -y chromium'"; exit 1; fi; \
	$$SUDO apt-get update; \
	DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y --no-install-recommends chromium; \
	test -x "$(CHROMIUM)" || { echo "error: apt-get did not provide $(CHROMIUM)"; exit 1; }

# README screenshot of the built site (after `make book`), through playwright as in the browser check.
screenshot: $(STAMP) chromium
	@test -f $(SITE)/notebooks/02_sinusoidal.html || { echo "run 'make book' first"; exit 1; }
	MLBOOK_CHROMIUM=$(CHROMIUM) $(BIN)/python tests/test_site.py screenshot \
	  notebooks/02_sinusoidal.html $(SHOT_ELEMENT) book/_static/screenshot.png

# The setup cell is generated: the repository URL lives in _config.yml alone.
setup-cells: $(STAMP)
	$(BIN)/python tools/setup_cells.py

# The committed benchmark records (src/mlbook/results/bench/, CPU records): the library's (RoPE apply,
# attention with position) and the book's (live-slider redraws, tools/bench_sliders.py, which times
# the notebooks' figures). Not part of `make test`; run on a quiet machine (~20 min on 2 cores).
bench: bench-lib bench-book

bench-lib: $(STAMP)
	$(BIN)/python -m mlbook.benchmarks run all --device cpu

bench-book: $(STAMP)
	$(BIN)/python tools/bench_sliders.py

clean:
	rm -rf _build
