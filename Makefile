# Two commands for a fresh machine:  `make run` (set up + serve the dashboard), `make test` (set up + full test suite).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000
# torch is pinned to the CPU build that lies on this machine's disk; a GPU host keeps the torch it has.
TORCH_SPEC  ?= torch==2.13.0
TRITON_SPEC ?= triton==3.6.0

.PHONY: setup run test test-fast lint chromium check bench clean readme-results

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(BIN)/activate pyproject.toml constraints.txt
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -c "import triton" 2>/dev/null || $(BIN)/pip install -q "$(TRITON_SPEC)"
	$(BIN)/pip install -q -c constraints.txt -e ".[web,test,fleet]"
	touch $@

setup: $(VENV)/.installed

run: setup
	$(BIN)/rmsnorm-dash serve --host $(HOST) --port $(PORT)

# Debian's Chromium for the Playwright browser tests (Playwright cannot download its own browser here).
chromium:
	@command -v chromium >/dev/null 2>&1 || ( (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || echo "could not install chromium: browser tests will fail" )

test: setup chromium lint
	$(BIN)/python -m pytest -q -ra

# ruff: pyflakes + pycodestyle errors and the formatter's verdict over the whole repository (pyproject.toml
# [tool.ruff]); `$(BIN)/ruff format .` formats
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test-fast: setup
	$(BIN)/python -m pytest -q -ra -m "not browser"

check: setup
	$(BIN)/rmsnorm-dash check

bench: setup
	$(BIN)/rmsnorm-dash bench

clean:
	rm -rf $(VENV) build *.egg-info

# Regenerate the README's results section from the committed GPU result files (never typed by hand).
readme-results: setup
	$(BIN)/rmsnorm-dash table results/*.json --markdown > .readme-results.md
	$(BIN)/python -c "import pathlib, re; p = pathlib.Path('README.md'); body = pathlib.Path('.readme-results.md').read_text(); \
	p.write_text(re.sub(r'(<!-- results:start -->\n).*?(<!-- results:end -->)', lambda m: m.group(1) + body + m.group(2), p.read_text(), flags=re.S))"
	rm -f .readme-results.md
