# Tokenmill. `make up` runs it locally with nothing but Python; `make test` is what CI runs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml requirements.lock requirements-refs.txt | sha256sum | cut -c1-12)

.PHONY: install up test test-fast test-unit test-kernels-nojit lint lock bench docs clean

install: $(STAMP)

$(STAMP): pyproject.toml requirements.lock requirements-refs.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# The project with the exact locked versions of everything it pulls in (transitive ones too).
	$(BIN)/pip install --quiet -c requirements.lock -e '.[dev]'
	# The GPT-2 rank file ships inside openai-whisper; take the file, not its torch dependency.
	$(BIN)/pip install --quiet --no-deps -r requirements-refs.txt
	rm -f $(VENV)/.installed-*
	touch $@

up: install
	$(BIN)/tokenmill up

# CI's command (README): the whole suite on two processes (each with its own database, Redis, S3
# server and stack; tests/conftest.py orders the suites for it), then the noisy-neighbour suite
# alone (it measures another team's latency, which a second process would disturb), then the
# kernels without the JIT. The slowest 25 tests are listed after the first.
test: install lint
	$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder --ignore=tests/neighbours --durations=25
	$(BIN)/python -m pytest tests/neighbours
	$(MAKE) test-kernels-nojit

lint: install
	$(BIN)/ruff check tokenmill service workers tests benchmarks migrations
	# The core, the service and the workers type-check strictly ([tool.mypy] in pyproject.toml).
	$(BIN)/mypy

# Rewrite requirements.lock from pyproject.toml (needs uv: `.venv/bin/pip install uv`).
lock:
	$(BIN)/uv pip compile pyproject.toml --extra dev --python-version 3.11 --no-header -o requirements.lock
	sed -i '1i # The exact versions `make install` installs (every transitive one): `make lock` writes it from pyproject.toml.' requirements.lock

# The quick loop: the unit tier (no service) without the tests marked slow, on every core (about a minute on 2).
test-fast: install
	$(BIN)/python -m pytest tests/unit -m "not slow" -n auto -p no:cacheprovider

test-unit: install
	$(BIN)/python -m pytest tests/unit

# The compiled kernels' tests once more as plain Python (numba's JIT off), but for the slow and large
# ones: what a kernel does, not what numba made of it (tests/unit/conftest.py). About 2 minutes on 2 cores.
test-kernels-nojit: install
	NUMBA_DISABLE_JIT=1 $(BIN)/python -m pytest tests/unit -m "kernels and not slow and not large" -n 2 -p no:cacheprovider

# Every figure of BENCHMARKS.md, one command each, in order (benchmarks/run.py lists them; its
# --quick runs them all small, --only NAME some). About an hour on 2 cores, more when shared.
bench: install
	$(BIN)/python -m benchmarks.run

# Refresh the README's screenshots from a browser test run (tests never write to docs/).
docs: install
	$(BIN)/python -m pytest tests/browser
	# Only the screenshots the documents show (build/screenshots holds more, some of them megabytes).
	for png in docs/*.png; do cp build/screenshots/$$(basename $$png) docs/ 2>/dev/null || true; done

clean:
	rm -rf $(VENV) .tokenmill
