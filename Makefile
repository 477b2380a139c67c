# spoolfetch — the commands of the README:
#   make run        installs missing system packages, builds, runs the daemon on ./spool
#   make test       installs what the tests need, runs the whole suite (and the install test)
#   make test-python  the Python client's and the Airflow provider's tests (venvs cached in .build/)
#   make install    release binary (Swift runtime linked in), man page, completions, unit, config
#   make uninstall  removes what make install put there (a config file you changed stays)
#   make deb        a Debian package of the same files, in .build/deb/
SHELL := /bin/bash
SPOOL ?= spool
SWIFT ?= swift
# System packages: the build needs the first two; the tests also start nginx and squid (a forward
# proxy), use curl, create
# network namespaces with iproute2's `ip`, mount a FUSE test filesystem written with pyfuse3
# (Tests/FUSE/powercutfs.py), run a GlusterFS volume mounted twice (Tests/GlusterFS/gluster-volume),
# the install test uses python3's http.server and unshare/mount, the package test debootstraps a
# Debian root (from the mirror the machine's own apt sources name) to install the .deb in and checks
# it with lintian and its man pages with man-db's `man --warnings`, and the shared-spool tests mount
# bindfs without lock forwarding. S3Tests make a virtual environment with moto and boto3 from PyPI
# in .build/moto-venv on first use (python3-venv; see Tests/S3/moto-s3.py).
BUILD_PACKAGES := libcurl4-openssl-dev libinotifytools0-dev
# What the scripts under Benchmarks/ run beside spoolfetch (the peers and the floors).
BENCH_PACKAGES := curl nginx-light aria2 wget time openssl coreutils apache2 caddy valgrind binutils
TEST_PACKAGES := $(BUILD_PACKAGES) curl nginx-light squid openssl iproute2 fuse3 python3-pyfuse3 python3 python3-venv glusterfs-server glusterfs-client bindfs prometheus tmux debootstrap xfsprogs lintian man-db e2fsprogs lighttpd lighttpd-mod-openssl apache2

# Install locations (GNU conventions). The unit and the cron example get these paths written in.
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/spoolfetch
# The config file goes to /etc for a system prefix (/usr, /usr/local), else beside the rest
# (PREFIX/etc): `make install PREFIX=$$HOME/opt` or a trial prefix never writes into /etc.
SYSCONFDIR ?= $(if $(filter /usr /usr/local,$(PREFIX)),/etc,$(PREFIX)/etc)
UNITDIR ?= $(PREFIX)/lib/systemd/system
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR ?= $(PREFIX)/share/zsh/site-functions
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d

# The release binary links the Swift runtime and Foundation statically, so it runs on a Debian
# machine without the toolchain; libcurl, libinotifytools, glibc and libstdc++ stay shared
# system libraries.
# SwiftPM caches its build manifest and does not notice a changed --static-swift-stdlib: a
# release binary linked without it (swift build -c release, a plugin's build) stays as it was.
# So the manifest is rebuilt, and the binary removed so that it is linked again.
RELEASE_FLAGS := -c release --static-swift-stdlib --disable-build-manifest-caching
RELEASE_BIN = $(shell $(SWIFT) build -c release --show-bin-path)/spoolfetch
DIST := .build/dist

.PHONY: run test test-unit test-python test-install test-example test-deb simulate build release dist deb deps test-deps bench-deps install uninstall clean

run: deps build
	$(SWIFT) run spoolfetch run --spool $(SPOOL)

build:
	$(SWIFT) build

# A release build is made again only when a source or the manifest changed since the last one
# (the stamp), so `make install` or `make deb` after `make release` reuses it — and runs no apt.
RELEASE_STAMP := .build/release-static.stamp
RELEASE_INPUTS := Package.swift $(shell find Sources -type f 2>/dev/null)

release: $(RELEASE_STAMP)

$(RELEASE_STAMP): $(RELEASE_INPUTS)
	@./scripts/ensure-packages $(BUILD_PACKAGES)
	rm -f "$(RELEASE_BIN)"
	$(SWIFT) build $(RELEASE_FLAGS) --product spoolfetch
	@mkdir -p $(@D) && touch $@

test: test-unit test-python test-install test-example test-deb

# The Python client (clients/python) and the Airflow provider (clients/airflow), tested with pytest
# against the real daemon binary. Each runs in a virtual environment of Debian's python3 under
# .build/, made once from PyPI and made again only when what pins it changes: pytest alone for the
# client (which needs nothing but the standard library), Airflow pinned by
# clients/airflow/constraints.txt for the provider. The packages themselves are installed anew on
# every run (pip install of the local folders, no dependencies fetched). pytest exits non-zero when
# no test ran (5) or, through the tests' conftest, when any was skipped.
PYTHON ?= /usr/bin/python3
PYTEST_VERSION := 9.2.0
AIRFLOW_VERSION := 2.10.5
PY_VENV := .build/python-venv
AIRFLOW_VENV := .build/airflow-venv
SPOOLFETCH_DEBUG_BIN = $(shell $(SWIFT) build --show-bin-path)/spoolfetch

$(PY_VENV)/.stamp: Makefile
	rm -rf $(PY_VENV)
	$(PYTHON) -m venv $(PY_VENV)
	$(PY_VENV)/bin/pip install -q "pytest==$(PYTEST_VERSION)"
	@touch $@

$(AIRFLOW_VENV)/.stamp: clients/airflow/constraints.txt
	rm -rf $(AIRFLOW_VENV)
	$(PYTHON) -m venv $(AIRFLOW_VENV)
	$(AIRFLOW_VENV)/bin/pip install -q "apache-airflow==$(AIRFLOW_VERSION)" "pytest==$(PYTEST_VERSION)" -c clients/airflow/constraints.txt
	@touch $@

test-python: test-deps $(PY_VENV)/.stamp $(AIRFLOW_VENV)/.stamp
	$(SWIFT) build --product spoolfetch
	$(PY_VENV)/bin/pip install -q --no-deps --force-reinstall ./clients/python
	$(AIRFLOW_VENV)/bin/pip install -q --no-deps --force-reinstall ./clients/python ./clients/airflow
	cd clients/python/tests && SPOOLFETCH_BIN="$(SPOOLFETCH_DEBUG_BIN)" \
	  SPOOLFETCH_TEST_INSTALLED=1 $(CURDIR)/$(PY_VENV)/bin/python -m pytest -p no:cacheprovider -q -rs .
	cd clients/airflow/tests && SPOOLFETCH_BIN="$(SPOOLFETCH_DEBUG_BIN)" \
	  $(CURDIR)/$(AIRFLOW_VENV)/bin/python -m pytest -p no:cacheprovider -q -rs -W ignore::DeprecationWarning .

# The whole output is also kept in .build/test-output.log; when a test fails, its failure lines
# are printed again at the end, where a CI log's tail shows them.
test-unit: test-deps
	$(SWIFT) build --build-tests
	@set -o pipefail; $(SWIFT) test --skip-build 2>&1 | tee .build/test-output.log || { \
	  echo "== failed tests (from .build/test-output.log) =="; \
	  grep -E ": error: |' failed \(" .build/test-output.log | cut -c1-600 | tail -40; exit 1; }

# The deterministic simulation of the core over more seeds than `make test` runs:
#   make simulate SEEDS=100000 [FIRST=1]   N seeds from FIRST; a failure prints its seed and trace
#   make simulate SEED=8                    one seed, its whole trace printed
#   make simulate SEEDS=1000 SURVEY=1       every seed run (no stop at a failure, regression seeds
#                                           left out); prints how many failed and the first one
#   make simulate SEEDS=1000 STORE=1        the same with the content store (--store) simulated
SEEDS ?= 10000
FIRST ?= 1
SURVEY ?=
STORE ?=
simulate:
	$(SWIFT) build --build-tests
	@if [ -n "$(SEED)" ]; then \
	  SPOOLFETCH_SIMULATION_SEED=$(SEED) SPOOLFETCH_SIMULATION_STORE=$(STORE) $(SWIFT) test --skip-build --filter SimulationTests/testSeedsKeepEveryInvariant; \
	else \
	  SPOOLFETCH_SIMULATION_SEEDS=$(SEEDS) SPOOLFETCH_SIMULATION_FIRST=$(FIRST) SPOOLFETCH_SIMULATION_SURVEY=$(SURVEY) SPOOLFETCH_SIMULATION_STORE=$(STORE) $(SWIFT) test --skip-build --filter SimulationTests/testSeedsKeepEveryInvariant; \
	fi

# Installs the .deb into a Debian root made by debootstrap (no Swift there), drains a download in
# it, purges it and checks that nothing is left (scripts/test-deb).
test-deb: test-deps
	./scripts/test-deb

# Builds Examples/SpoolfetchKitExample against this checkout and runs it across a restart
# (scripts/test-example).
test-example: test-deps
	./scripts/test-example

# Installs into a throw-away DESTDIR and runs the installed binary with /opt/swift (the
# toolchain) hidden; see scripts/test-installed.
test-install: test-deps
	./scripts/test-installed

# Everything make install copies, built under .build/dist: spoolfetch(1) from the command's own
# description of its options (scripts/make-manpage), spoolfetch(5) from the README's format sections (scripts/make-manpage5) and the completion scripts the binary prints.
dist: release
	rm -rf $(DIST) && mkdir -p $(DIST)
	./scripts/make-manpage "$(RELEASE_BIN)" $(DIST)/spoolfetch.1
	./scripts/make-manpage5 README.md "$$("$(RELEASE_BIN)" --version)" $(DIST)/spoolfetch.5
	@# A completion file is sourced, not run: no #! line (lintian: bash-completion-with-hashbang).
	"$(RELEASE_BIN)" --generate-completion-script bash | sed '1{/^#!/d}' > $(DIST)/spoolfetch.bash
	"$(RELEASE_BIN)" --generate-completion-script zsh > $(DIST)/_spoolfetch
	"$(RELEASE_BIN)" --generate-completion-script fish > $(DIST)/spoolfetch.fish
	sed -e 's|/usr/local/bin/spoolfetch|$(BINDIR)/spoolfetch|g' \
	    -e 's|/etc/spoolfetch.conf|$(SYSCONFDIR)/spoolfetch.conf|g' \
	    -e 's|/usr/share/doc/spoolfetch|$(DOCDIR)|g' contrib/spoolfetch.service > $(DIST)/spoolfetch.service
	sed -e 's|/usr/local/bin/spoolfetch|$(BINDIR)/spoolfetch|g' contrib/spoolfetch.cron > $(DIST)/spoolfetch.cron

# The spool `make install` initialises (see the install target): its folder, the daemon's user, the producers' group.
SPOOL_DIR ?= /var/spool/spoolfetch
SPOOL_USER ?= spoolfetch
SPOOL_PRODUCERS ?= spoolfetch-producers

install: dist
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(DOCDIR)/examples \
		$(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR) \
		$(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR)
	install -m 755 -s "$(RELEASE_BIN)" $(DESTDIR)$(BINDIR)/spoolfetch
	install -m 644 $(DIST)/spoolfetch.1 $(DESTDIR)$(MANDIR)/man1/spoolfetch.1
	install -m 644 $(DIST)/spoolfetch.5 $(DESTDIR)$(MANDIR)/man5/spoolfetch.5
	install -m 644 $(DIST)/spoolfetch.bash $(DESTDIR)$(BASHCOMPDIR)/spoolfetch
	install -m 644 $(DIST)/_spoolfetch $(DESTDIR)$(ZSHCOMPDIR)/_spoolfetch
	install -m 644 $(DIST)/spoolfetch.fish $(DESTDIR)$(FISHCOMPDIR)/spoolfetch.fish
	install -m 644 $(DIST)/spoolfetch.service $(DESTDIR)$(UNITDIR)/spoolfetch.service
	install -m 644 README.md $(DESTDIR)$(DOCDIR)/README.md
	install -m 644 contrib/spoolfetch.conf $(DIST)/spoolfetch.cron contrib/prometheus/spoolfetch-alerts.yml \
		contrib/grafana/spoolfetch-dashboard.json $(DESTDIR)$(DOCDIR)/examples/
	@# A config file already there is the administrator's: never overwritten.
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/spoolfetch.conf ]; then \
		echo "kept $(DESTDIR)$(SYSCONFDIR)/spoolfetch.conf (the example is in $(DOCDIR)/examples)"; \
	else install -m 644 contrib/spoolfetch.conf $(DESTDIR)$(SYSCONFDIR)/spoolfetch.conf; fi
	@# The spool, made or tightened by `spoolfetch init` (README "A spool for several producers"), when
	@# installing into this system and the daemon's user and the producers' group exist; else the line to run.
	@if [ -z "$(DESTDIR)" ] && getent passwd $(SPOOL_USER) >/dev/null && getent group $(SPOOL_PRODUCERS) >/dev/null; then \
		$(BINDIR)/spoolfetch init --spool $(SPOOL_DIR) --user $(SPOOL_USER) --producers $(SPOOL_PRODUCERS); \
	else echo "to make the spool: $(BINDIR)/spoolfetch init --spool $(SPOOL_DIR) --user $(SPOOL_USER) --producers $(SPOOL_PRODUCERS)"; fi

# The Debian package: what `make install PREFIX=/usr` puts into a staging root, packed by
# scripts/make-deb into .build/deb/ (the config file a conffile). Reuses a current release build.
DEB_ROOT := .build/deb/root
deb: dist
	rm -rf $(DEB_ROOT)
	$(MAKE) --no-print-directory install DESTDIR=$(CURDIR)/$(DEB_ROOT) PREFIX=/usr SYSCONFDIR=/etc UNITDIR=/lib/systemd/system
	./scripts/make-deb $(DEB_ROOT) .build/deb

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/spoolfetch $(DESTDIR)$(MANDIR)/man1/spoolfetch.1 $(DESTDIR)$(MANDIR)/man5/spoolfetch.5 \
		$(DESTDIR)$(BASHCOMPDIR)/spoolfetch $(DESTDIR)$(ZSHCOMPDIR)/_spoolfetch \
		$(DESTDIR)$(FISHCOMPDIR)/spoolfetch.fish $(DESTDIR)$(UNITDIR)/spoolfetch.service
	rm -rf $(DESTDIR)$(DOCDIR)
	@# The config file goes only if it is still the shipped example.
	@if cmp -s contrib/spoolfetch.conf $(DESTDIR)$(SYSCONFDIR)/spoolfetch.conf; then \
		rm -f $(DESTDIR)$(SYSCONFDIR)/spoolfetch.conf; \
	elif [ -e $(DESTDIR)$(SYSCONFDIR)/spoolfetch.conf ]; then \
		echo "kept $(DESTDIR)$(SYSCONFDIR)/spoolfetch.conf (changed since install)"; fi

deps:
	@./scripts/ensure-packages $(BUILD_PACKAGES)

test-deps:
	@./scripts/ensure-packages $(TEST_PACKAGES)

bench-deps:
	@./scripts/ensure-packages $(BENCH_PACKAGES)

clean:
	rm -rf .build
