# provisiond — run `make help` for the targets.
GO        ?= go
PKGS      := ./...
TESTFLAGS ?= -race -count=1 -timeout 15m
BENCHTIME ?= 2s
FUZZTIME  ?= 30s
CRASH_CYCLES ?= 1000

.DEFAULT_GOAL := help

build: ## build provisiond (and the other commands) into bin/
	$(GO) build -o bin/ ./cmd/...

completions: build ## provisionctl shell completion scripts (bash, zsh, fish) into bin/completion/
	mkdir -p bin/completion
	for sh in bash zsh fish; do bin/provisionctl completion $$sh > bin/completion/provisionctl.$$sh; done

# The shared Juju facade schema the conformance tests read (internal/schematest).
SCHEMA ?= $(or $(PROVISIOND_SCHEMA),../shared/protocol/facades-schema.json)

test: lint depcheck ## lint, depcheck, then every test with the race detector, and state's again on etcd (what CI runs)
	@[ -f "$(SCHEMA)" ] || echo "NOTE: no Juju facade schema at $(SCHEMA): the schema conformance tests will be skipped (set PROVISIOND_SCHEMA; with CI=true they fail instead)"
	$(GO) test $(TESTFLAGS) $(PKGS)
	$(MAKE) --no-print-directory test-state-etcd

test-state-etcd: ## the state tests again on a one-member embedded etcd instead of bbolt: one conformance suite of both stores
	PROVISIOND_TEST_STORE=etcd $(GO) test $(TESTFLAGS) ./state/

test-short: ## quick tests without the race detector
	$(GO) test -short -count=1 $(PKGS)

lint: ## gofmt check, go vet, staticcheck (go.mod's tool), and no built binaries tracked in git
	@scripts/check-tracked.sh
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)

depcheck: ## check the package dependency direction (docs/architecture.md, Packages)
	@scripts/depcheck.sh

bench: ## Go benchmarks: Ping vs echo baseline, the rpc read path, hub, state reads and commits (provisionbench: docs/performance.md)
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count 5 ./rpc/... ./internal/daemon/ ./watcher/ ./state/...

# Every fuzz target, as PACKAGE:Target; `make fuzz` runs each for FUZZTIME.
FUZZ_TARGETS := \
	./rpc/:FuzzDecodeHeader \
	./rpc/params/:FuzzDecodeEntities \
	./rpc/params/:FuzzDecodeSetStatus \
	./facades/facade/:FuzzTags \
	./internal/daemon/:FuzzMethodParams \
	./charm/:FuzzParseMeta \
	./storage/:FuzzParseConstraints \
	./size/:FuzzParseMiB \
	./state/:FuzzParseMachineConstraints

fuzz: ## run each fuzz target for FUZZTIME (their seed corpora run in every `make test`)
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "== $${t#*:} ($${t%%:*})"; \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 10s "$${t%%:*}"; \
	done

crash: ## crash-safety harness: CRASH_CYCLES (1000) SIGKILL/restart cycles under write load, on bbolt and on etcd (CI runs 50)
	CRASH_CYCLES=$(CRASH_CYCLES) $(GO) test -race -count=1 -timeout 3h -v -run '^(TestCrashRecovery|TestCrashRecoveryEtcd|TestHarnessCatchesPlantedBug)$$' ./internal/crashtest/

ROBUSTNESS_DURATION ?= 5m
ROBUSTNESS_RESUMED ?= on

robustness: ## robustness harness: etcd members and daemons as processes under faults drawn from a seed, the history checked by a model, for ROBUSTNESS_DURATION (5m; ROBUSTNESS_SEED replays; ROBUSTNESS_RESUMED=off leaves out the resumed watchers; make test runs 30s)
	ROBUSTNESS_DURATION=$(ROBUSTNESS_DURATION) ROBUSTNESS_RESUMED=$(ROBUSTNESS_RESUMED) $(GO) test -race -count=1 -timeout 0 -v -run '^TestRobustness$$' ./internal/robustness/

tidy-check: ## fail when go.mod/go.sum are not tidy
	$(GO) mod tidy && git diff --exit-code go.mod go.sum

screenshots: ## the dashboard's browser test, keeping its screenshots in bin/screenshots/ (needs chromium)
	rm -rf bin/screenshots && mkdir -p bin/screenshots
	$(GO) test -count=1 -run '^TestBrowser' -artifacts -outputdir $(CURDIR)/bin/screenshots ./internal/dashboard/
	find bin/screenshots -name '*.png'

clean: ## remove build output
	rm -rf bin/

help: ## list the targets and where the docs are
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "} {printf "  %-12s %s\n", $$1, $$2}'
	@echo
	@echo "Docs: README.md (the front door and its map of docs/), docs/operator-guide.md, docs/provisionctl.md,"
	@echo "docs/cli.md, docs/developing.md, docs/architecture.md (start here:"
	@echo "packages, a request's path, goroutines, errors), docs/reliability.md, docs/performance.md,"
	@echo "docs/benchmarks.md, docs/provisioner.md, docs/caasunitprovisioner.md."

.PHONY: screenshots build completions test test-state-etcd test-short lint depcheck bench fuzz crash robustness tidy-check clean help
