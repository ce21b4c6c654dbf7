# draxr — build, test and benchmark targets. Everything runs from go.mod
# versions; nothing is downloaded besides Go modules.
GO ?= go
BIN := bin
PKGS := ./...
BENCH_COUNT ?= 6
BENCH_PKGS ?= ./simulator/... ./autoscaler/...

.PHONY: all build test test-unit lint bench fmt vet example

all: build

build:
	$(GO) build -o $(BIN)/draxr ./simulator/cmd/draxr

example: build
	$(BIN)/draxr simulate

test:
	$(GO) test -count=1 $(PKGS)

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

# Benchmarks: medians over BENCH_COUNT runs; compare with benchstat.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) $(BENCH_PKGS) | tee bench.out
