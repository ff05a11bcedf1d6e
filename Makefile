# Tokenmill. `make up` runs it locally with nothing but Python; `make test` is what CI runs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml requirements-refs.txt | sha256sum | cut -c1-12)

.PHONY: install up test test-unit bench docs clean

install: $(STAMP)

$(STAMP): pyproject.toml requirements-refs.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	# The GPT-2 rank file ships inside openai-whisper; take the file, not its torch dependency.
	$(BIN)/pip install --quiet --no-deps -r requirements-refs.txt
	rm -f $(VENV)/.installed-*
	touch $@

up: install
	$(BIN)/tokenmill up

test: install
	$(BIN)/python -m pytest

test-unit: install
	$(BIN)/python -m pytest tests/unit

bench: install
	$(BIN)/python -m benchmarks.run

# Refresh the README's screenshots from a browser test run (tests never write to docs/).
docs: install
	$(BIN)/python -m pytest tests/browser
	cp build/screenshots/*.png docs/

clean:
	rm -rf $(VENV) .tokenmill
