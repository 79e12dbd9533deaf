# One entry point for learners, instructors and maintainers. Every target sets up
# what it needs first (a virtual environment in .venv with pinned dependencies).
# The Pythons the course runs on (pyproject.toml's requires-python says the same; tests/coursekit/test_makefile.py
# keeps the two in step). Unless PYTHON is given, the first of python3, python3.13, python3.12, python3.11 and pyenv's
# that is one of them.
PYTHONS := 3.11 3.12 3.13
supported = $(1) -c 'import sys; sys.exit("%d.%d" % sys.version_info[:2] not in "$(PYTHONS)".split())' >/dev/null 2>&1
PYENV_PYTHONS = $(wildcard $(or $(PYENV_ROOT),$(HOME)/.pyenv)/versions/3.1[123]*/bin/python)
PYTHON ?= $(or $(shell for p in python3 python3.13 python3.12 python3.11 $(PYENV_PYTHONS); do \
                $(call supported,$$p) && { echo $$p; break; }; done),python3)
# PyTorch's build: TORCH=cpu (the default: no GPU needed, about 1.7 GB installed with the rest) or TORCH=cuda (PyPI's
# Linux build with the CUDA 13 libraries, about 5.4 GB). On Linux PyPI has only the CUDA build, so TORCH=cpu takes
# torch from PyTorch's own CPU index, when this machine reaches it (otherwise it says so, and pip takes a CPU wheel
# already at hand in PIP_FIND_LINKS, or else PyPI's CUDA build); on macOS and Windows PyPI's build is the CPU one.
# `make setup` prints which build it installed and how big .venv is. Once installed, change it with
# `rm -rf .venv && make setup TORCH=cuda`.
TORCH ?= cpu
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: setup bytecode lab demo test test-fast test-pythons test-figures capstone sync expected grade hub node proxy bench clean \
        system-for-tests system-for-grading

setup: $(STAMP)

# What the machine must have beyond Python 3.11 (command:Debian package): grading runs student code in bubblewrap;
# the tests also drive Debian's Chromium, make TLS certificates with openssl, run the hub's proxy with Node, create
# Unix users (the hub tests run as root) and read the LMS exports with PHP's fgetcsv (Moodle's reader) and Ruby's CSV
# (Canvas's). As root, the missing packages are installed (apt-get); otherwise the target stops at once with the one
# command that installs them, before anything runs.
GRADING_NEEDS := bwrap:bubblewrap
TEST_NEEDS    := $(GRADING_NEEDS) chromium:chromium openssl:openssl node:nodejs npm:npm useradd:passwd php:php-cli ruby:ruby
define need_system
	@missing=$$(for need in $(1); do c=$${need%%:*}; p=$${need##*:}; \
	    command -v $$c >/dev/null 2>&1 || [ -x /usr/sbin/$$c ] || [ -x /usr/bin/$$c ] || echo $$p; done | sort -u | xargs); \
	if [ "$(2)" = root ] && [ "$$(id -u)" != 0 ]; then \
	    echo "make $(or $(MAKECMDGOALS),$@): the hub tests create Unix users and start each user's server as that user, so the tests run as root:" >&2; \
	    echo "    sudo make $(or $(MAKECMDGOALS),$@)" >&2; \
	    [ -z "$$missing" ] || echo "(as root it also installs what is missing: $$missing)" >&2; exit 2; fi; \
	if [ -n "$$missing" ]; then \
	    if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	        echo "installing what make $(or $(MAKECMDGOALS),$@) needs: $$missing"; \
	        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 2; \
	    else \
	        echo "make $(or $(MAKECMDGOALS),$@) needs $$missing, which this machine lacks: install it with" >&2; \
	        echo "    sudo apt-get install -y $$missing" >&2; exit 2; fi; fi
endef

system-for-tests:
	$(call need_system,$(TEST_NEEDS),root)

system-for-grading:
	$(call need_system,$(GRADING_NEEDS),any)

# The course's own modules compiled once (quick when nothing changed): an editable install leaves them uncompiled,
# and where PYTHONDONTWRITEBYTECODE is set each of the hundreds of kernels, sandboxes and commands that grading and
# the tests start would compile them again (about 0.4 s of CPU each).
bytecode: setup
	@$(BIN)/python -m compileall -q coursekit grader solutions tests

$(STAMP): pyproject.toml constraints.txt
	@case "$(TORCH)" in cpu|cuda) ;; *) echo "make $(or $(MAKECMDGOALS),setup): TORCH=$(TORCH)? Run" \
	    "make $(or $(MAKECMDGOALS),setup) TORCH=cpu (no GPU) or TORCH=cuda (an NVIDIA GPU)" >&2; exit 2;; esac
	@$(call check_python,$(PYTHON))
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@case "$(TORCH)" in \
	  cpu) torch=; if [ "$$(uname -s)" = Linux ]; then \
	         if $(BIN)/python -c 'import urllib.request as u; u.urlopen("$(TORCH_CPU_INDEX)/torch/", timeout=15)' \
	            >/dev/null 2>&1; then torch="--extra-index-url $(TORCH_CPU_INDEX)"; \
	         else echo "TORCH=cpu: PyTorch's CPU index ($(TORCH_CPU_INDEX)) cannot be reached from here, so pip takes"\
	                   "torch from PIP_FIND_LINKS or PyPI, whose Linux build is the CUDA one (about 5.4 GB installed)"; fi; fi;; \
	  cuda) torch="torch===2.13.0";; \
	  esac; \
	echo "$(BIN)/pip install -c constraints.txt -e '.[test]' $$torch"; \
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test]' $$torch
	@$(BIN)/python -c 'import torch; print("installed PyTorch", torch.__version__, "(CUDA %s build)" % torch.version.cuda if torch.version.cuda else "(CPU build)")'
	@echo "$(VENV): $$(du -sh $(VENV) | cut -f1)"
	@touch $(STAMP)

# Python $(PYTHONS) with its venv module, or the one command that gets one (before anything is installed)
define check_python
	py="$(1)"; v=$$($$py -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null); \
	if ! $(call supported,$$py); then \
	    other=$$(for p in python3.13 python3.12 python3.11 $(PYENV_PYTHONS); do \
	        $(call supported,$$p) && { echo $$p; break; }; done); \
	    echo "make $(or $(MAKECMDGOALS),setup): the course runs on Python $(firstword $(PYTHONS)) to $(lastword $(PYTHONS));"\
	         "$$py is $${v:-not there}. Run" >&2; \
	    if [ -n "$$other" ]; then echo "    make $(or $(MAKECMDGOALS),setup) PYTHON=$$other" >&2; \
	    elif command -v apt-get >/dev/null 2>&1; then \
	        echo "    sudo apt-get install -y python3.11-venv && make $(or $(MAKECMDGOALS),setup) PYTHON=/usr/bin/python3.11" >&2; \
	    elif command -v brew >/dev/null 2>&1; then echo "    brew install python@3.13" >&2; \
	    else echo "    pyenv install 3.12     (then make picks it itself)" >&2; fi; \
	    exit 2; fi; \
	$$py -c 'import ensurepip, venv' 2>/dev/null || { \
	    echo "make $(or $(MAKECMDGOALS),setup): Python $$v's venv module is missing: sudo apt-get install -y python$$v-venv" >&2; exit 2; }
endef

## learners: the course in JupyterLab (your notebooks live in workspace/ and are never overwritten)
lab: setup
	$(BIN)/course lab

## headless equivalent: release every notebook, autograde sample submissions, check the scores
demo: system-for-grading bytecode
	$(BIN)/course demo

## maintainers: the whole test suite, five groups side by side on 2 cores (they keep both cores busy while one
## waits on a browser, a hub, a time limit or a lock; the 15 slowest tests are listed at the end); the notebooks run
## with training capped (a reduced run): `make test-figures` trains them in full
test: system-for-tests bytecode node
	$(BIN)/python -m pytest -n 5 --dist loadgroup --no-loadscope-reorder --durations=15 -m "not figures"

## maintainers: the fast loop while you work: everything but what drives real nbgrader, Jupyter kernels,
## JupyterLab or the browser, trains for long, or runs the benchmarks (make test runs those too)
test-fast: system-for-grading bytecode
	$(BIN)/python -m pytest -n 2 --dist loadgroup --no-loadscope-reorder --durations=15 -m "not pipeline and not browser and not figures and not experiment and not bench"

## maintainers: the course on Python 3.12 and 3.13 where this machine has them (python3.X or pyenv's), each set up
## by `make setup` in a folder outside the repository (PYTHONS_DIR; PyPI's torch there is the CUDA build on Linux,
## about 5 GB each), then the fast suite, one notebook graded in the sandbox (`course demo 03_softmax`) and the student
## bundle installed and used (tests/coursekit/pipeline/test_bundle.py); what passed, the times and the sizes go to
## docs/bench/pythons.md. Not part of make test.
PYTHONS_DIR ?= /tmp/attention-course-pythons
test-pythons: system-for-grading setup
	$(BIN)/python tests/other_pythons.py --dir $(PYTHONS_DIR) $(filter-out $(firstword $(PYTHONS)),$(PYTHONS))

## maintainers: the long experiment, one notebook at a time: every step of training, and the accuracy each states
test-figures: bytecode
	$(BIN)/python -m pytest -p no:xdist --durations=5 -m figures

## maintainers: notebook 10's full experiment (eleven runs of 1500 steps, one process and one torch thread each,
## one per core at a time: 9 min 29 s on 2 cores; it prints its total) with the reference's prefix-LM mask: the table by source length
## (mean over the seeds), CPU ms per step and per token, and capstone_results.json (make test runs it reduced)
capstone: setup
	$(BIN)/python -m coursekit.capstone_command --out capstone_results.json

## maintainers: notebooks' answer/test cells from solutions/, and the grader's shipped expectations
sync: setup
	$(BIN)/course sync
	$(BIN)/course expected

## instructors: grade everything in course/submitted/<student>/<assignment>/ in parallel (one worker per core);
## make grade COURSE=dir ASSIGNMENTS="a b" for another course folder, or only some assignments
grade: system-for-grading bytecode
	$(BIN)/course grade $(if $(COURSE),--course $(COURSE)) $(ASSIGNMENTS)

## instructors: the Node packages the hub needs, from the npm registry with this machine's Node (20.19 or later), in
## node/: the hub's proxy, configurable-http-proxy as pinned in node/package-lock.json, and the course's JupyterLab
## plugin for the hub (node/hub-lab/src), built by JupyterLab's own extension builder (@jupyter/builder, pinned in
## node/hub-lab/package-lock.json) against this install's JupyterLab into node/share/jupyter, which is on every hub
## user's JUPYTER_PATH, with MathJax 2 (npm's mathjax, pinned there too: what nbgrader's formgrader pages call) beside
## it, which the formgrader serves itself. Again only when a lock, a source file or the install changed. (`make proxy`
## is the same.)
HUB_PROXY := node/node_modules/.bin/configurable-http-proxy
HUB_LAB   := node/share/jupyter/labextensions/@attention-course/hub-lab
# MathJax's TeX input and CommonHTML output with their TeX fonts, extensions and languages (not the HTML-CSS and SVG
# outputs' 17 MB, nor its unminified copy)
MATHJAX   := MathJax.js LICENSE config/TeX-AMS_CHTML-full.js config/Safe.js extensions localization jax/element \
             jax/input/TeX jax/output/CommonHTML jax/output/PreviewHTML jax/output/NativeMML fonts/HTML-CSS/TeX/woff
LAB_CORE  := $(VENV)/share/jupyter/lab/static/package.json
node: $(HUB_PROXY) $(HUB_LAB)/package.json
proxy: node

# Node 20.19 or later (the builder's rspack needs ^20.19 or >=22.12): Debian 13's nodejs; on Debian 12 and Ubuntu 24.04
# (Node 18) NodeSource's or nodejs.org's
define check_node
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || { echo "make $(or $(MAKECMDGOALS),node):" \
	    "the hub needs Node 20.19 or later with npm: install Debian 13's (sudo apt-get install -y nodejs npm) or, on" \
	    "Debian 12 and Ubuntu 24.04, Node 22 from NodeSource or nodejs.org" >&2; exit 2; }
	@node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>22||a==22&&b>=12||a==20&&b>=19?0:1)' \
	    || { echo "make $(or $(MAKECMDGOALS),node): Node $$(node --version) is too old for the hub's lab plugin's" \
	    "builder: install Node 20.19 or later (22 from NodeSource or nodejs.org on Debian 12 and Ubuntu 24.04)" >&2; exit 2; }
endef

$(HUB_PROXY): node/package.json node/package-lock.json
	$(call check_node)
	npm ci --prefix node --no-audit --no-fund
	@touch $@

node/hub-lab/node_modules/.package-lock.json: node/hub-lab/package.json node/hub-lab/package-lock.json
	$(call check_node)
	npm ci --prefix node/hub-lab --no-audit --no-fund
	@touch $@

$(HUB_LAB)/package.json: node/hub-lab/node_modules/.package-lock.json node/hub-lab/src $(wildcard node/hub-lab/src/*) \
                         $(wildcard node/hub-lab/style/*) $(STAMP)
	rm -rf $(HUB_LAB)
	$(BIN)/jupyter-builder build node/hub-lab --core-package-file $(LAB_CORE) || { rm -rf $(HUB_LAB); exit 1; }
	mkdir -p $(HUB_LAB)/mathjax && cd node/hub-lab/node_modules/mathjax \
	    && cp -R --parents $(MATHJAX) $(CURDIR)/$(HUB_LAB)/mathjax/ || { rm -rf $(CURDIR)/$(HUB_LAB); exit 1; }
	@touch $@

## instructors: a JupyterHub for the class on this machine, as root (README: "A class on a JupyterHub");
## e.g. sudo make hub HUB_ARGS="--instructor alice --roster roster.csv --create-users"
hub: system-for-grading bytecode node
	$(BIN)/course hub $(HUB_ARGS)

## maintainers: the benchmarks, each a ratio against a baseline measured in the same run; the results, with the date
## and the machine, go to docs/bench/latest.md and latest.csv (git keeps the older ones)
BENCH_RUN := $(VENV)/bench-run.csv
bench: system-for-grading bytecode
	@rm -f $(BENCH_RUN)
	BENCH_RESULTS=$(abspath $(BENCH_RUN)) $(BIN)/python bench/attention.py
	BENCH_RESULTS=$(abspath $(BENCH_RUN)) $(BIN)/python bench/reference_vs_torch.py
	BENCH_RESULTS=$(abspath $(BENCH_RUN)) $(BIN)/python bench/kv_cache.py
	BENCH_RESULTS=$(abspath $(BENCH_RUN)) $(BIN)/python bench/widgets.py
	BENCH_RESULTS=$(abspath $(BENCH_RUN)) $(BIN)/python bench/isolation.py --assignments 03_softmax 05_rnn 09_kv_cache
	BENCH_RESULTS=$(abspath $(BENCH_RUN)) $(BIN)/python bench/grading.py --sizes 10 40
	$(BIN)/python bench/results.py $(BENCH_RUN)

clean:
	rm -rf demo-output course/release course/autograded course/feedback course/gradebook.db course/.jupyter
