# Set-up and entry points. Everything installs into .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: venv test demo bench clean redis-server chromium

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

# The shared-frontier tests need a real redis-server: installed here when
# we are root with apt (CI), else those tests are skipped with the command
# (and fail under CI=true).
redis-server:
	@command -v redis-server >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server; \
	  else echo "redis-server not found: its tests will be skipped (install: sudo apt-get install redis-server)"; fi; }

# The dashboard tests drive a headless Chromium (Playwright, with Debian's
# browser: Playwright's own download is not needed): installed the same way;
# without it those tests are skipped (and fail under CI=true).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; \
	  else echo "chromium not found: the dashboard tests will be skipped (install: sudo apt-get install chromium)"; fi; }

# Lint and type-check first (ruff's and mypy's settings are in
# pyproject.toml: mypy checks numeric, storage and scoring), then the suite
# in parallel (pytest-xdist): many tests wait on crawler subprocesses and
# servers, so TEST_WORKERS=4 keeps two cores busy; work stealing evens out
# the long tests. TEST_WORKERS=0 runs it in one process. The sources are
# compiled once first: the suite starts a few hundred Python processes
# (crawls, tools, servers), and under PYTHONDONTWRITEBYTECODE each of them
# would compile the package again.
TEST_WORKERS ?= 4
test: venv redis-server chromium
	$(BIN)/ruff check frontera_linkrank tests benchmarks
	$(BIN)/mypy
	$(BIN)/python -m compileall -q frontera_linkrank tests benchmarks
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal

# Serve the Hollins graph (installed in frontera_linkrank/data) on 127.0.0.1,
# crawl it with example_project, print the 20 most important pages
# (example_project/demo.sh).
demo: venv
	BIN=$(BIN) sh example_project/demo.sh

bench: venv
	$(BIN)/python benchmarks/ingest.py
	$(BIN)/python benchmarks/crawl_quality.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
