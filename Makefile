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
# make names targets by their paths, and a path with a space is two targets to it: refused here, in one
# line, before anything runs (`rm -rf $(VENV)` would remove ./my and ./venv for VENV="my venv"). Every
# recipe quotes its paths all the same.
refuse_spaces = $(foreach var,$(1),$(if $(filter-out 1,$(words $($(var)))),$(error $(var)="$($(var))" is empty or has a space, which make cannot use as a folder name; choose another, e.g. $(var)=.venv-mine)))
$(call refuse_spaces,VENV)

.PHONY: course test app notebooks bench clean-venv site hub hub-install bench-hub i18n

$(BIN)/python:
	@"$(PYTHON)" -c 'import sys; sys.exit(sys.version_info < (3, 10) and "mha-course needs Python >= 3.10")'
	"$(PYTHON)" -m venv "$(VENV)"

$(VENV)/.installed-%: pyproject.toml | $(BIN)/python
	"$(BIN)/python" -m pip install --upgrade pip
	"$(BIN)/python" -m pip install -e ".[$(subst -,$(comma),$*)]"
	@touch "$@"

## Open the course in JupyterLab on the first notebook, with the repository as its root, so the
## notebooks' links to ../docs/glossary.md and ../README.md open.
course: $(STAMP)
	"$(BIN)/jupyter" lab $(AS_ROOT) --ServerApp.root_dir=. --LabApp.default_url=/lab/tree/notebooks/00_overview.ipynb

## Run the whole test suite: lint (ruff), the floors (import-linter), then unit, property and
## parity tests and every notebook under nbval. Each step fails the run on a violation. What needs
## PyTorch or a browser skips when they are absent, and -rs lists each skip with its reason; the
## slow busy-machine test runs only with --busy (CI's full run).
test: $(STAMP)
	"$(BIN)/ruff" check .
	"$(BIN)/lint-imports"
	"$(BIN)/python" -m pytest -n auto --dist loadfile -rs

## The explorer as a standalone app (Voila) for a workshop screen.
app: $(APP_STAMP)
	"$(BIN)/voila" notebooks/explorer_app.ipynb

## Re-execute every notebook in place (reproducibly, one BLAS thread; a cell past the timeout or a dead kernel stops it, naming the cell).
notebooks: $(STAMP)
	"$(BIN)/mha-course" execute notebooks/*.ipynb

## The course in Chinese from one source: re-extract the notebooks' and the glossary's prose into
## locales/zh_CN/LC_MESSAGES/<stem>.po (Babel); a message whose English changed is marked fuzzy (shown in
## English until a translator reviews it), then print how much of each catalogue is translated.
i18n: $(STAMP)
	"$(BIN)/python" -m mha_course.tools.i18n update

## Speed benchmarks (each side and thread setting in fresh processes; writes benchmarks/results/*.json,
## then prints the README's speed tables made from them).
bench: $(VENV)/.installed-bench
	"$(BIN)/python" benchmarks/bench_mha.py
	"$(BIN)/python" benchmarks/bench_threads.py
	"$(BIN)/python" benchmarks/bench_efficient.py
	"$(BIN)/python" benchmarks/bench_explorer.py
	"$(BIN)/python" benchmarks/bench_training.py
	"$(BIN)/python" benchmarks/bench_decode.py
	"$(BIN)/python" benchmarks/readme_tables.py

## The course as a static web book in build/site/ (Sphinx + MyST-NB, the engine of Jupyter Book 1):
## every notebooks/NN_*.ipynb with its stored outputs and saved widgets, a landing page for learners,
## MathJax / require.js / the widget renderer from npm into the book's own files; a warning fails it.
## It is built into build/site.new/ and swapped in only when whole, so an interrupted or failed
## rebuild keeps the last book. HUB_URL=https://hub.example.org makes each page's "run this notebook"
## link open it on that JupyterHub (/hub/user-redirect/lab/tree/notebooks/...); without it, the link
## downloads the .ipynb.
BOOK_NPM := build/book-npm
HUB_URL  ?=
# make site BOOK_LANG=zh_CN: the Chinese book too, in build/site/zh_CN/, and a language switch on every page of both.
# (Not LANG: that is the locale variable, and `make site LANG=zh_CN` would hand Sphinx a locale the
# machine does not have, so its setlocale() fails.)
BOOK_LANG ?=
BOOK_BOTH := $(if $(filter zh_CN,$(BOOK_LANG)),1,)
site: $(VENV)/.installed-site $(BOOK_NPM)/.installed
	@rm -rf build/site.new build/site.old build/site-doctrees build/site-doctrees-zh_CN build/jupyter_execute
	MHA_COURSE_BOOK_BOTH="$(BOOK_BOTH)" MHA_COURSE_HUB_URL="$(HUB_URL)" "$(BIN)/python" -m sphinx -b html -W --keep-going -c book -d build/site-doctrees . build/site.new
ifeq ($(BOOK_LANG),zh_CN)
	"$(BIN)/python" -m mha_course.tools.i18n book build/book-src-zh_CN
	MHA_COURSE_BOOK_BOTH=1 MHA_COURSE_BOOK_LANG=zh_CN MHA_COURSE_HUB_URL="$(HUB_URL)" "$(BIN)/python" -m sphinx -b html -W --keep-going -c book -d build/site-doctrees-zh_CN build/book-src-zh_CN build/site.new/zh_CN
endif
	@if [ -d build/site ]; then mv build/site build/site.old; fi
	@mv build/site.new build/site && rm -rf build/site.old
	@echo 'The book: build/site/index.html (serve it: "$(BIN)/python" -m http.server --bind 127.0.0.1 --directory build/site 8000)'

$(BOOK_NPM)/.installed: book/package.json
	@command -v npm >/dev/null 2>&1 || { echo "make site needs npm (Node.js) to vendor MathJax, require.js and the widget renderer: apt-get install -y npm" >&2; exit 1; }
	@mkdir -p "$(BOOK_NPM)"
	cp book/package.json "$(BOOK_NPM)/package.json"
	npm install --prefix "$(BOOK_NPM)" --no-audit --no-fund --loglevel=error
	@touch "$@"

## A JupyterHub for a workshop on this machine (as root): http://127.0.0.1:8000/ by default, a Unix user
## and a fresh student copy per learner on first login, one BLAS thread each, idle servers culled.
## The learners' servers run their own venv (build/hub/venv, from HUB_PYTHON, which every user can read).
## make hub HUB_IP=0.0.0.0 HUB_PORT=8000 HUB_ARGS="--learners learners.txt"; Ctrl-C stops it all.
HUB_PYTHON ?= /usr/bin/python3
HUB_VENV   ?= build/hub/venv
$(call refuse_spaces,HUB_VENV)
HUB_NPM    := build/hub-npm
HUB_IP     ?= 127.0.0.1
HUB_PORT   ?= 8000
HUB_ARGS   ?=
# HUB_EXTRAS=hub,reference adds PyTorch (notebook 12's bridge) to the learners' venv
HUB_EXTRAS ?= hub
HUB_STAMP  := $(HUB_VENV)/.installed-$(subst $(comma),-,$(HUB_EXTRAS))
LEARNERS   ?= 4
SPREAD     ?= 0
hub: hub-install
	"$(HUB_VENV)/bin/python" deploy/hub/workshop_hub.py --ip $(HUB_IP) --port $(HUB_PORT) --proxy "$(HUB_NPM)/node_modules/.bin/configurable-http-proxy" $(HUB_ARGS)

hub-install: $(HUB_STAMP) $(HUB_NPM)/.installed

$(HUB_STAMP): pyproject.toml
	@test -x "$(HUB_PYTHON)" || { echo "make hub needs a Python that every learner's Unix user can run; HUB_PYTHON=$(HUB_PYTHON) is missing (apt-get install -y python3-venv, or HUB_PYTHON=/path/to/python3)" >&2; exit 1; }
	"$(HUB_PYTHON)" -m venv "$(HUB_VENV)"
	"$(HUB_VENV)/bin/python" -m pip install --upgrade pip
	"$(HUB_VENV)/bin/python" -m pip install -e ".[$(HUB_EXTRAS)]"
	@touch "$@"

$(HUB_NPM)/.installed: deploy/hub/package.json
	@command -v npm >/dev/null 2>&1 || { echo "make hub needs npm (Node.js) for configurable-http-proxy: apt-get install -y npm" >&2; exit 1; }
	@mkdir -p "$(HUB_NPM)"
	cp deploy/hub/package.json "$(HUB_NPM)/package.json"
	npm install --prefix "$(HUB_NPM)" --no-audit --no-fund --loglevel=error
	@touch "$@"

## The hub under a class's load: LEARNERS learners start (over SPREAD s) and each runs notebook 01.
bench-hub: hub-install
	"$(HUB_VENV)/bin/python" benchmarks/bench_hub.py --learners $(LEARNERS) --spread $(SPREAD)

## Remove the virtual environment (only VENV itself: its path is quoted, and one with a space is refused above).
clean-venv:
	rm -rf -- "$(VENV)"
