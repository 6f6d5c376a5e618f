# mha-course: the two commands of the README are `make course` and `make test`.
# Each creates .venv if missing and installs the course into it; a second run
# reinstalls nothing unless pyproject.toml changed.
PYTHON ?= python3
VENV   ?= .venv
EXTRAS ?= test
BIN    := $(VENV)/bin
comma  := ,
STAMP  := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))
APP_STAMP := $(VENV)/.installed-app
# Jupyter refuses to run as root unless told; containers and CI machines often are root.
AS_ROOT := $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root,)

.PHONY: course test app notebooks bench clean-venv

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10) and "mha-course needs Python >= 3.10")'
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-%: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -e ".[$(subst -,$(comma),$*)]"
	@touch $@

## Open the course in JupyterLab on the first notebook.
course: $(STAMP)
	$(BIN)/jupyter lab $(AS_ROOT) notebooks/00_overview.ipynb

## Run the whole test suite: lint (ruff), the floors (import-linter), then unit, property and
## parity tests and every notebook under nbval. Each step fails the run on a violation. What needs
## PyTorch or a browser skips when they are absent, and -rs lists each skip with its reason; the
## slow busy-machine test runs only with --busy (CI's full run).
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -n auto --dist loadfile -rs

## The explorer as a standalone app (Voila) for a workshop screen.
app: $(APP_STAMP)
	$(BIN)/voila notebooks/explorer_app.ipynb

## Re-execute every notebook in place (reproducibly, one BLAS thread; a cell past the timeout or a dead kernel stops it, naming the cell).
notebooks: $(STAMP)
	$(BIN)/mha-course execute notebooks/*.ipynb

## Speed benchmarks (each side and thread setting in fresh processes; writes benchmarks/results/*.json,
## then prints the README's speed tables made from them).
bench: $(VENV)/.installed-bench
	$(BIN)/python benchmarks/bench_mha.py
	$(BIN)/python benchmarks/bench_threads.py
	$(BIN)/python benchmarks/bench_efficient.py
	$(BIN)/python benchmarks/bench_explorer.py
	$(BIN)/python benchmarks/bench_training.py
	$(BIN)/python benchmarks/bench_decode.py
	$(BIN)/python benchmarks/readme_tables.py

clean-venv:
	rm -rf $(VENV)
