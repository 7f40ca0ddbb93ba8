# The two commands of the README: `make demo` and `make test`. Each sets up .venv first,
# installing only what it needs (the demo: numpy, protobuf, crc32c, scikit-learn, tqdm).
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test docs chromium

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# The editable installs put the checkout on sys.path with a .pth line (editable_mode=compat),
# which mypy and pyright follow; setuptools' default mode installs an import hook they cannot
# see. The Makefile is a prerequisite, so that a change to how it installs reinstalls.
EDITABLE := --config-settings editable_mode=compat

$(VENV)/.demo: setup.cfg setup.py Makefile | $(PY)
	$(PY) -m pip install -q $(EDITABLE) -e '.[demo]'
	touch $@

# The tests exercise every extra. torch comes first and pinned to its CPU build: a bare
# 'torch' requirement would pull a CUDA build of several GB.
$(VENV)/.test: setup.cfg setup.py Makefile | $(PY) chromium
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q $(EDITABLE) -e '.[test,demo,docs,remote,plot,progress,jax,keras,image]'
	touch $@

# The docs' browser test opens the built site in a headless Chromium (Debian's package). It is
# installed where it can be (root and apt-get); elsewhere this says so and the tests go on: the
# browser test is then skipped, naming what is missing, except under CI=true, where it fails.
chromium:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null \
	|| { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	     && apt-get update -q && apt-get install -y -q chromium; } \
	|| echo "note: Chromium is not installed and cannot be here (apt-get install chromium needs \
	root); the docs' browser test will be skipped" >&2

$(VENV)/.docs: setup.cfg setup.py Makefile | $(PY)
	$(PY) -m pip install -q $(EDITABLE) -e '.[docs]'
	touch $@

# The documentation site, in site/ (mermaid is fetched once with npm; see mkdocs.yml).
docs: $(VENV)/.docs
	$(PY) -m mkdocs build --strict

demo: $(VENV)/.demo
	$(PY) examples/demo.py

# pytest exits 5 when it collected no test: that is a broken setup, never a pass.
test: $(VENV)/.test
	$(PY) -m pytest; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: the setup is broken" >&2; fi; \
	exit $$rc
