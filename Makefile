# spoolfetch — the two commands of the README:
#   make run    installs missing system packages, builds, runs the daemon on ./spool
#   make test   installs what the tests need, runs the whole suite
SHELL := /bin/bash
SPOOL ?= spool
SWIFT ?= swift
# System packages: the build needs the first two; the tests also start nginx, use curl, create
# network namespaces with iproute2's `ip`, and mount a FUSE test filesystem written with pyfuse3
# (Tests/FUSE/powercutfs.py).
BUILD_PACKAGES := libcurl4-openssl-dev libinotifytools0-dev
TEST_PACKAGES := $(BUILD_PACKAGES) curl nginx-light openssl iproute2 fuse3 python3-pyfuse3

.PHONY: run test build release deps test-deps clean

run: deps build
	$(SWIFT) run spoolfetch run --spool $(SPOOL)

build:
	$(SWIFT) build

release:
	$(SWIFT) build -c release

test: test-deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

deps:
	@./scripts/ensure-packages $(BUILD_PACKAGES)

test-deps:
	@./scripts/ensure-packages $(TEST_PACKAGES)

clean:
	rm -rf .build
