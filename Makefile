# Two commands: `make lab` (work on the course) and `make test` (everything CI runs).
# Each creates .venv when missing and installs the pinned environment (requirements.txt)
# plus this package, re-installing only when requirements.txt or pyproject.toml changed.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
JOBS   ?= 2
LAB_ARGS ?=
# What the first install brings, read from requirements.txt (so this message never drifts).
PINS   := $(shell grep -E '^(torch|tensorflow|jupyterlab)==' requirements.txt | tr '\n' ' ')

.PHONY: lab test system-deps install build check solutions lint unit notebooks-test benchmark clean

# JupyterLab's defaults for this environment: no prompt about Jupyter news, no update check (a course
# environment is pinned; its first screen is the notebook).
LAB_DEFAULTS := $(VENV)/share/jupyter/lab/settings/overrides.json

lab: $(STAMP) $(LAB_DEFAULTS)
	@echo "Starting JupyterLab on notebooks/ (stop it with Ctrl-C, twice)."
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root) \
		--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate $(LAB_ARGS)

$(LAB_DEFAULTS): scripts/lab-overrides.json | $(STAMP)
	mkdir -p $(dir $@)
	cp scripts/lab-overrides.json $@

test: $(STAMP) system-deps
	$(PY) -m helpers.build --check
	$(VENV)/bin/ruff check src tests benchmarks solutions notebooks conftest.py
	$(PY) -m pytest -n $(JOBS) --dist loadscope --nbval solutions tests

install: $(STAMP)

system-deps:
	bash scripts/system-deps.sh

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): requirements.txt pyproject.toml | $(PY)
	@echo "==> Installing the course environment into $(VENV)/: $(strip $(PINS)),"
	@echo "    the other pins of requirements.txt, and this repository's helpers package."
	@echo "    The first time: about 1 GB to download and 3.5 GB on disk, some 3 minutes on a fast"
	@echo "    connection and longer on a slow one; pip says little while it unpacks PyTorch and"
	@echo "    TensorFlow. Later runs reinstall only when requirements.txt or pyproject.toml change."
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -r requirements.txt -e ".[torch,tensorflow,grader,dev]"
	touch $(STAMP)

build: $(STAMP)
	$(PY) -m helpers.build

check: $(STAMP)
	$(PY) -m helpers.build --check

# Maintainers: re-run every solution notebook with the pinned versions, store its
# outputs (refused if a cell errs or writes to stderr), then regenerate the exercises.
solutions: $(STAMP)
	$(PY) -m helpers.execute solutions/*.ipynb
	$(PY) -m helpers.build

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks solutions notebooks conftest.py

benchmark: $(STAMP)
	$(PY) benchmarks/suite.py

clean:
	rm -rf $(VENV) grades .pytest_cache
