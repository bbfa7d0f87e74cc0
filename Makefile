# raftmaster build, test and run targets. `make help` lists them.
GO          ?= go
BIN         := bin/raftmaster
BENCH_BIN   := bin/raftmaster-bench
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Packages whose property tests take -rapid.checks.
RAPID_PKGS  := ./fsm/... ./recordio/...
RAPID_CHECKS ?= 1000
# The unit tier's property tests: rapid's own default.
SHORT_RAPID_CHECKS ?= 100
TEST_TIMEOUT ?= 25m
HEAVY_TIMEOUT ?= 60m

.DEFAULT_GOAL := help
.PHONY: help build bench-build test test-short test-heavy python-test python-env lint check generate-check tidy-check shellcheck python-lint bench bench-short bench-full bench-rdzv run demo first-hour chaos chaos-variants image version manifests docker-test fuzz clean

help: ## list the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-z-]+:.*## /{printf "  %-15s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# The build's version: the release in VERSION, the one place it is
# written (the Python package and the Helm chart carry it too, and a test
# fails when they differ), and where the tree stands from its tag
# (scripts/version.sh).
VERSION ?= $(shell ./scripts/version.sh 2>/dev/null)
LDFLAGS := $(if $(VERSION),-X github.com/raftmaster/raftmaster/internal/version.stamp=$(VERSION))

build: ## build bin/raftmaster (static), its version stamped from VERSION and git
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/raftmaster

# The Helm chart's checks: a module of their own, for the Kubernetes API
# types; helm runs through go run from the module proxy.
DEPLOYTEST  := internal/deploytest

# The tests come in three tiers (CONTRIBUTING.md says which test goes
# where): test-short, the unit tests, every test that starts real
# processes skipping itself under -short; test, all but the heavy tier and
# Docker; test-heavy, the tests of the files tagged heavy.
test-short: ## the unit tier: every package under -short with the race detector, no real processes (about 2 minutes on 2 cores)
	$(GO) test -short -race -count=1 -timeout $(TEST_TIMEOUT) $$($(GO) list ./... | grep -v -e /fsm -e /recordio)
	$(GO) test -short -race -count=1 -timeout $(TEST_TIMEOUT) $(RAPID_PKGS) -rapid.checks=$(SHORT_RAPID_CHECKS)
	cd $(DEPLOYTEST) && $(GO) test -short -race -count=1 -timeout $(TEST_TIMEOUT) ./...

test: ## every test but the heavy and Docker ones, with the race detector: real processes, the Helm chart's checks and the Python tests included
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $$($(GO) list ./... | grep -v -e /fsm -e /recordio)
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(RAPID_PKGS) -rapid.checks=$(RAPID_CHECKS)
	cd $(DEPLOYTEST) && $(GO) vet ./... && $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	$(MAKE) python-test

# The heavy tier: the files tagged heavy, their packages and their tests.
HEAVY_FILES = $(shell grep -rlx --include='*_test.go' --exclude-dir=.git '//go:build heavy' .)
HEAVY_PKGS  = $(sort $(dir $(HEAVY_FILES)))
HEAVY_TESTS = $(shell sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T) {$$/\1/p' $(HEAVY_FILES) | paste -sd'|')

test-heavy: ## the heavy tier (build tag heavy): every test of a file tagged heavy, one package at a time: long fault runs and large data
	$(GO) test -tags heavy -count=1 -p 1 -timeout $(HEAVY_TIMEOUT) -run '^($(HEAVY_TESTS))$$' -v $(HEAVY_PKGS)

# The interpreter of the Python tests and of make python-env: Debian's,
# which python3-torch, python3-snappy and python3-pytest install into,
# where there is one; else the first python3 on the PATH.
PYTHON ?= $(if $(wildcard /usr/bin/python3),/usr/bin/python3,python3)
VENV   ?= .venv

python-test: build ## build bin/raftmaster and run the Python package's tests (python/tests) with $(PYTHON)
	cd python && RAFTMASTER_BIN=$(CURDIR)/$(BIN) $(PYTHON) -m pytest -q -p no:cacheprovider tests

# No package index and no build: the venv sees the interpreter's own
# packages (torch, snappy), and a .pth file puts ./python on its path, so
# the package is installed in editable form without pip, setuptools or wheel.
python-env: ## a venv in $(VENV) from $(PYTHON) (its packages, torch too, in view) with ./python installed, offline
	$(PYTHON) -m venv --system-site-packages --without-pip $(VENV)
	$(VENV)/bin/python -c 'import pathlib, sys, sysconfig; pathlib.Path(sysconfig.get_path("purelib"), "raftmaster.pth").write_text(sys.argv[1] + "\n")' "$(CURDIR)/python"
	@$(VENV)/bin/python -c 'import raftmaster, sys; print("raftmaster %s from %s, Python %s" % (raftmaster.__version__, raftmaster.__path__[0], sys.version.split()[0]))'
	@$(VENV)/bin/python -c 'import torch; print("torch %s: importable" % torch.__version__)' 2>/dev/null || \
		echo "torch: not importable from $(PYTHON) (apt install python3-torch, or pip install torch in the venv)"
	@echo "activate it with: . $(VENV)/bin/activate"

lint: ## gofmt, go vet and staticcheck (of the heavy tier's build too) and the FSM determinism guard
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags heavy $(HEAVY_PKGS)
	$(GO) run $(STATICCHECK) ./...
	$(GO) run $(STATICCHECK) -tags heavy $(HEAVY_PKGS)
	cd $(DEPLOYTEST) && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...
	$(GO) test -count=1 -run '^TestDeterminismGuard$$' ./fsm/

check: lint generate-check tidy-check shellcheck python-lint ## make lint, the go generate and go mod tidy checks, shellcheck and the Python lint and type check (.ci/run runs it before the tests)

# What the tree holds beyond HEAD, untracked files included: go generate
# must leave it as it was, so that the generated files committed are what
# their sources generate.
TREE_CHANGES = { git diff HEAD --binary; git ls-files -z -o --exclude-standard | xargs -0 -r sha256sum; }
generate-check: ## fail when go generate would change a file, in either module
	@before=$$(mktemp) after=$$(mktemp); trap 'rm -f "$$before" "$$after"' EXIT; \
	$(TREE_CHANGES) >"$$before" && \
	$(GO) generate ./... && (cd $(DEPLOYTEST) && $(GO) generate ./...) && \
	$(TREE_CHANGES) >"$$after" && \
	if ! cmp -s "$$before" "$$after"; then \
		echo "go generate changed the tree; run it and commit what it writes:"; \
		diff "$$before" "$$after" | head -n 100; \
		exit 1; \
	fi

tidy-check: ## fail when go mod tidy would change go.mod or go.sum, in either module
	$(GO) mod tidy -diff
	cd $(DEPLOYTEST) && $(GO) mod tidy -diff

# The shell scripts: Debian's shellcheck package.
SHELL_SCRIPTS := .ci/run $(wildcard scripts/*.sh)
shellcheck: ## shellcheck the shell scripts
	shellcheck $(SHELL_SCRIPTS)

# flake8 and mypy of $(PYTHON): Debian's python3-flake8 and python3-mypy.
python-lint: ## flake8 over the Python package, its tests and example; mypy over the package, which ships py.typed
	cd python && $(PYTHON) -m flake8 raftmaster tests ../examples/python
	cd python && $(PYTHON) -m mypy raftmaster

bench: ## run the benchmarks (figures, not assertions)
	$(GO) test -run '^$$' -bench . -benchmem ./...

bench-build: ## build bin/raftmaster-bench, the side-by-side suite (embeds etcd, so not in bin/raftmaster)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BENCH_BIN) ./cmd/raftmaster-bench

BENCH_OUT ?= bench-out
bench-short: build bench-build ## raftmaster beside etcd, raw Raft and the etcd backend, the sessions part and a fleet of 1,000 trainers, short (a few minutes; BENCH_OUT=dir)
	$(BENCH_BIN) --short --raftmaster $(BIN) --out $(BENCH_OUT)

bench-full: build bench-build ## the full side-by-side run behind the README's figures, fleets of 1,000, 3,000 and 10,000 trainers included, into docs/bench (about 45 minutes on 2 cores)
	$(BENCH_BIN) --raftmaster $(BIN) --out docs/bench

# The simulated-scale rendezvous: AGENTS threads of one Python process,
# each a torchrun agent with a client and session of its own, through
# RDZV_ROUNDS rounds of torch's dynamic rendezvous on a local 3-node
# cluster (data in RDZV_DATA, removed after; ports from RDZV_PORT). The
# agents whose writes of the state lose take turns, as the backend's do;
# RDZV_FLAGS=--no-turns makes them back off at random instead, to compare.
AGENTS         ?= 1000
RDZV_ROUNDS    ?= 3
RDZV_WAIT      ?= 10
RDZV_KEEPALIVE ?= 30
RDZV_BACKOFF   ?= 10
RDZV_PORT      ?= 18701
RDZV_DATA      ?= data/bench-rdzv
RDZV_PROCS     ?= 1
RDZV_TTL       ?= 30
RDZV_FLAGS     ?=
bench-rdzv: build ## time a rendezvous round of AGENTS (1000) simulated torchrun agents on a local cluster, and the leader's requests/s while they wait
	@rm -rf $(RDZV_DATA) && mkdir -p $(RDZV_DATA)
	@$(BIN) local --data-dir $(RDZV_DATA) --raft-port $(RDZV_PORT) --http-port $$(($(RDZV_PORT)+10)) >$(RDZV_DATA)/cluster.out 2>$(RDZV_DATA)/cluster.log & \
	cluster=$$!; trap 'kill -TERM $$cluster 2>/dev/null; wait $$cluster 2>/dev/null; rm -rf $(RDZV_DATA)' EXIT; \
	addrs=127.0.0.1:$$(($(RDZV_PORT)+10)),127.0.0.1:$$(($(RDZV_PORT)+11)),127.0.0.1:$$(($(RDZV_PORT)+12)); \
	for a in $$(echo $$addrs | tr , ' '); do $(BIN) health --addr $$a --wait 60s >/dev/null || exit 1; done; \
	RAFTMASTER_RDZV_SECRET=$$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n') $(PYTHON) python/bench/rendezvous_agents.py \
		--addrs $$addrs --agents $(AGENTS) --rounds $(RDZV_ROUNDS) --wait $(RDZV_WAIT) \
		--keep-alive-interval $(RDZV_KEEPALIVE) --cas-backoff-max $(RDZV_BACKOFF) --processes $(RDZV_PROCS) \
		--session-ttl $(RDZV_TTL) $(RDZV_FLAGS)

CHAOS_TIME ?= 5m
CHAOS_RUN  ?= 1m
chaos: ## randomized fault-injection runs for CHAOS_TIME, CHAOS_RUN each (SEED=n replays one seed; CHAOS_FAULTS=a,b narrows the kinds)
	CHAOS_TIME=$(CHAOS_TIME) CHAOS_RUN=$(CHAOS_RUN) SEED=$(SEED) CHAOS_FAULTS=$(CHAOS_FAULTS) CHAOS_OUT=$(CURDIR)/chaos-out \
		$(GO) test -count=1 -timeout 0 -run '^TestChaos$$' -v ./internal/chaos/

chaos-variants: ## prove the fault-injection checks catch deliberately broken builds
	CHAOS_EXPECT_VIOLATION=1 CHAOS_FAULTS=lose-answers,kill-leader,pause-leader \
		$(GO) test -count=1 -timeout 30m -tags chaos_broken_client -run '^TestChaosExpectViolation$$' -v ./internal/chaos/
	CHAOS_EXPECT_VIOLATION='register linearizability' CHAOS_FAULTS=lose-answers,kill-leader,pause-leader \
		$(GO) test -count=1 -timeout 30m -tags chaos_broken_client -run '^TestChaosExpectViolation$$' -v ./internal/chaos/
	CHAOS_EXPECT_VIOLATION=1 RAFTMASTER_BUILD_TAGS=chaos_broken_fsm $(GO) test -count=1 -timeout 30m -run '^TestChaosExpectViolation$$' -v ./internal/chaos/
	CHAOS_EXPECT_VIOLATION='one leader per term' CHAOS_FAULTS=pause-leader,isolate-leader CHAOS_ONCE=crash-all \
		RAFTMASTER_BUILD_TAGS=chaos_broken_votes $(GO) test -count=1 -timeout 30m -run '^TestChaosExpectViolation$$' -v ./internal/chaos/
	CHAOS_EXPECT_VIOLATION='sessions hold tasks alone' RAFTMASTER_BUILD_TAGS=chaos_broken_sessions \
		$(GO) test -count=1 -timeout 30m -run '^TestChaosExpectViolation$$' -v ./internal/chaos/
	CHAOS_EXPECT_VIOLATION='finished twice in pass' \
		$(GO) test -count=1 -timeout 30m -tags chaos_broken_finish -run '^TestChaosExpectViolation$$' -v ./internal/chaos/

version: ## print the version make stamps into the binary and tags the image with
	@echo $(VERSION)

# The image: a linux binary for the Docker engine's architecture, whatever
# the host's, built here (no image registry, so no golang build stage) into
# IMAGE_DIR, the CA bundle beside it, and deploy/Dockerfile FROM scratch.
IMAGE       ?= raftmaster
IMAGE_DIR   := bin/image
IMAGE_ARCH  ?= $(shell docker version --format '{{.Server.Arch}}' 2>/dev/null)
CA_BUNDLE   ?= /etc/ssl/certs/ca-certificates.crt
image: ## build the Docker image $(IMAGE):VERSION (and $(IMAGE):local, which deploy/compose-* run)
	@test -n "$(IMAGE_ARCH)" || { echo "make image: Docker did not say its architecture: is the engine running (docker info)?"; exit 1; }
	@test -f "$(CA_BUNDLE)" || { echo "make image: no CA bundle at $(CA_BUNDLE); set CA_BUNDLE=FILE"; exit 1; }
	rm -rf $(IMAGE_DIR) && mkdir -p $(IMAGE_DIR)/state
	GOOS=linux GOARCH=$(IMAGE_ARCH) CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(IMAGE_DIR)/raftmaster ./cmd/raftmaster
	cp $(CA_BUNDLE) $(IMAGE_DIR)/ca-certificates.crt
	docker build -q -f deploy/Dockerfile --build-arg VERSION=$(VERSION) -t $(IMAGE):$(VERSION) -t $(IMAGE):local .
	@echo "built $(IMAGE):$(VERSION) and $(IMAGE):local for linux/$(IMAGE_ARCH)"

manifests: ## render deploy/kubernetes/raftmaster.yaml from the Helm chart (a test fails when they differ)
	cd $(DEPLOYTEST) && $(GO) test -count=1 -run '^TestRawManifestIsTheChartRendered$$' . -update

docker-test: ## the image, and the compose clusters under a partition, scaling 3-5-3, two wiped volumes and a rolling restart (needs Docker)
	$(GO) test -tags docker -count=1 -timeout 45m -run '^TestDocker' -v ./internal/integration/

FUZZTIME ?= 60s
fuzz: ## run each fuzz target (RecordIO decoding, FSM apply/restore/decode) for FUZZTIME
	$(GO) test -run '^$$' -fuzz '^FuzzLoadIndex$$' -fuzztime $(FUZZTIME) ./recordio/
	$(GO) test -run '^$$' -fuzz '^FuzzChunk$$' -fuzztime $(FUZZTIME) ./recordio/
	$(GO) test -run '^$$' -fuzz '^FuzzApply$$' -fuzztime $(FUZZTIME) ./fsm/
	$(GO) test -run '^$$' -fuzz '^FuzzRestore$$' -fuzztime $(FUZZTIME) ./fsm/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./fsm/

run: build ## start a local 3-node cluster on 127.0.0.1 (data in ./data), Ctrl-C to stop
	$(BIN) local --nodes 3 --data-dir data

demo: build ## pack a sample dataset and run three trainers through two passes on a local cluster (FAILOVER=1: kill the leader mid-pass)
	FAILOVER=$(FAILOVER) ./scripts/demo.sh

first-hour: ## a new user's first hour on real processes: the quick start, the Go and Python paths, a wrong address, a node killed under the local cluster (scripts/first-hour.sh, about a minute)
	./scripts/first-hour.sh

clean: ## remove build output and local data
	rm -rf bin data bench-out
