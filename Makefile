# The two commands of the README: `make demo` and `make test`. Each sets up .venv first.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test

$(VENV)/.installed: setup.cfg setup.py
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,demo]'
	touch $@

demo: $(VENV)/.installed
	$(PY) examples/demo.py

# pytest exits 5 when it collected no test: that is a broken setup, never a pass.
test: $(VENV)/.installed
	$(PY) -m pytest; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: the setup is broken" >&2; fi; \
	exit $$rc
