# Gatehouse: `make run` brings it up, `make test` proves it works.
# dev/ensure-uv prints uv's path (installing uv with pip if needed) or nothing, with the reason on stderr.
UV := $(shell dev/ensure-uv)
ifeq ($(UV),)
$(error no uv to run (see dev/ensure-uv's message above); install it: https://docs.astral.sh/uv/)
endif

.PHONY: install run test lint format bench migrate screenshots chaos images

install:
	$(UV) sync --locked

run: install
	$(UV) run --locked python dev/run.py

# Every test, on two processes (a test file each at a time); ARGS goes to pytest (make test ARGS="tests/unit -k gate"). Where nothing answers at DATABASE_URL /
# REDIS_URL (or their defaults) it runs on embedded servers under var/test-stores (tests/support/stores.py).
test: install
	$(UV) run --locked pytest -n 2 --dist loadfile $(ARGS)

lint: install
	$(UV) run --locked ruff check .
	$(UV) run --locked ruff format --check .

format: install
	$(UV) run --locked ruff check --fix .
	$(UV) run --locked ruff format .

bench: install
	$(UV) run --locked python -m bench

# The chaos suite (tests/chaos): CHAOS_MINUTES (default 10) of load and random faults, CHAOS_SEED replays a run.
chaos: install
	$(UV) run --locked python -m tests.chaos

migrate: install
	$(UV) run --locked gatehouse-migrate

# The README's console pictures, taken by the browser tests (tests/e2e/console) on real processes.
screenshots: install
	rm -rf var/screenshots
	GATEHOUSE_TEST_OUTPUT=var/screenshots $(UV) run --locked pytest -q tests/e2e/console
	mkdir -p docs
	cp var/screenshots/console/overview.png docs/console-overview.png
	cp var/screenshots/console/account-gate.png docs/console-gate.png

# Our images built from the real Dockerfiles with podman and local stand-in bases (dev/images.py; state in
# var/images), then run read-only as their pods would run them (tests/deploy/test_images.py).
images: install
	$(UV) run --locked python dev/images.py
	GATEHOUSE_IMAGES_BUILT=1 $(UV) run --locked pytest -q tests/deploy/test_images.py
