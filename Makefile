# Gatehouse: `make run` brings it up, `make test` proves it works.
UV := $(shell dev/ensure-uv)

.PHONY: install run test lint format bench migrate

install:
	$(UV) sync --locked

run: install
	$(UV) run --locked python dev/run.py

test: install
	$(UV) run --locked pytest

lint: install
	$(UV) run --locked ruff check .
	$(UV) run --locked ruff format --check .

format: install
	$(UV) run --locked ruff check --fix .
	$(UV) run --locked ruff format .

bench: install
	$(UV) run --locked python -m bench

migrate: install
	$(UV) run --locked gatehouse-migrate
