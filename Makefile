# The two commands of the README: `make demo` and `make test`. Each sets up .venv first,
# installing only what it needs (the demo: numpy, protobuf, crc32c, scikit-learn, tqdm), and
# builds the compiled core (queuepipe/_core/*.c) in place. `make sanitize` runs the record
# and parsing tests on a core built with AddressSanitizer and UBSan.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test docs chromium core sanitize

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools

# The compiled core, rebuilt in place whenever a C source changes, so that a stale build never
# shadows an edit (the editable install builds it once; this keeps it current). Without a C
# compiler the build warns and queuepipe runs on its pure path: the stamp is then not made,
# and the next make tries again.
CORE_SOURCES := setup.py $(wildcard queuepipe/_core/*.c queuepipe/_core/*.h)

$(VENV)/.core: $(CORE_SOURCES) | $(PY)
	$(PY) setup.py -q build_ext --inplace
	$(PY) -c 'import queuepipe._qpcore' 2>/dev/null && touch $@ || true

core: $(VENV)/.core

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

demo: $(VENV)/.demo $(VENV)/.core
	$(PY) examples/demo.py

# pytest exits 5 when it collected no test: that is a broken setup, never a pass.
test: $(VENV)/.test $(VENV)/.core
	$(PY) -m pytest; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: the setup is broken" >&2; fi; \
	exit $$rc

# The core built with AddressSanitizer and UBSan (halting at the first report) into its own
# build directory, whose copy of the package the tests import (pytest run as a script, so that
# the checkout's own queuepipe/ is not first on the path); then the record and parsing tests,
# the corpus and the differential fuzzer under it. LD_PRELOAD: the ASan runtime must come
# before the interpreter's libraries; CPython's own allocations at exit are not leaks; and
# PYTHONMALLOC=malloc, or an over-read of a small bytes object stays inside pymalloc's arenas;
# allocator_may_return_null: a request past what memory holds fails as malloc's does (NULL,
# a MemoryError) instead of ending the run, so the tests of what the core does then can run.
# pytest -s: a sanitizer report ends the process, and with pytest's capture it went unseen.
SANITIZE_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined \
	-fno-omit-frame-pointer -g -O1
SANITIZE_TESTS := tests/test_core.py tests/test_records.py tests/test_readers.py \
	tests/test_parsing.py tests/test_parsing_tf_rules.py tests/test_core_parse_diff.py \
	tests/test_columns.py tests/test_sparse.py tests/test_plan.py tests/test_queues.py \
	tests/stress/test_fuzz.py
SANITIZE_ENV := PYTHONPATH=$(CURDIR)/build/sanitize/lib QUEUEPIPE_REQUIRE_CORE=1 \
	LD_PRELOAD="$$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 PYTHONMALLOC=malloc

sanitize: $(VENV)/.test
	rm -rf build/sanitize
	CFLAGS="$(SANITIZE_FLAGS)" LDFLAGS="$(SANITIZE_FLAGS)" QUEUEPIPE_WERROR=1 \
	QUEUEPIPE_REQUIRE_CORE=1 $(PY) setup.py -q build --build-base build/sanitize \
	--build-lib build/sanitize/lib
	cd build && $(SANITIZE_ENV) $(abspath $(PY)) -c 'import queuepipe._qpcore as c; \
	assert "/build/sanitize/lib/" in c.__file__, c.__file__'
	$(SANITIZE_ENV) $(VENV)/bin/pytest -q -s -p no:cacheprovider $(SANITIZE_TESTS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: the setup is broken" >&2; fi; \
	[ $$rc -eq 0 ] || exit $$rc
	$(SANITIZE_ENV) $(PY) fuzz/fuzz_records.py --differential 5000
	$(SANITIZE_ENV) $(PY) fuzz/fuzz_example.py -n 5000
