# Sluice: the commands a newcomer needs. See README.md.
JOBS ?= $(shell nproc)
RELEASE_DIR := build
TEST_DIR := build-test
PREFIX ?= /usr/local
FUZZ_SECONDS ?= 60
FUZZ_PARALLEL ?= 1

SOAK_SECONDS ?= 1800

.PHONY: all build test check fuzz bench attack soak run package image install deps deps-build format clean

all: build

# Everything the tests and benchmarks need, and what building needs alone.
deps:
	@scripts/install-deps.sh

deps-build:
	@scripts/install-deps.sh build

build: deps-build
	@cmake -S . -B $(RELEASE_DIR) -DCMAKE_BUILD_TYPE=Release -DSLUICE_BUILD_TESTS=OFF >/dev/null
	@cmake --build $(RELEASE_DIR) -j $(JOBS)

# Debug + AddressSanitizer + UndefinedBehaviorSanitizer, then every ctest test.
test: deps
	@cmake -S . -B $(TEST_DIR) -DCMAKE_BUILD_TYPE=Debug -DSLUICE_SANITIZE=ON -DSLUICE_BUILD_BENCH=OFF >/dev/null
	@cmake --build $(TEST_DIR) -j $(JOBS)
	@cd $(TEST_DIR) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

# The fast unit tests alone (ctest -L unit): the library, the config toolkit,
# policy, render, the simulator and the layer check. Builds neither the
# server nor gRPC; seconds once built.
check: deps
	@cmake -S . -B $(TEST_DIR) -DCMAKE_BUILD_TYPE=Debug -DSLUICE_SANITIZE=ON -DSLUICE_BUILD_BENCH=OFF >/dev/null
	@cmake --build $(TEST_DIR) -j $(JOBS) --target unit_tests embed_example
	@cd $(TEST_DIR) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS) -L unit

# The .deb for operators (cmake/package.cmake): the Release build, then CPack.
package: deps build
	@cd $(RELEASE_DIR) && cpack -G DEB
	@ls $(RELEASE_DIR)/*.deb

# The container image (packaging/container, docs/DEPLOY.md): sluice:VERSION
# and sluice:latest, FROM scratch out of the Release binary and exactly the
# libraries it links, with podman or docker (whichever answers `info`).
image: build
	@version=$$($(RELEASE_DIR)/sluice --version | cut -d' ' -f2) && \
	  packaging/container/build-image.sh $(RELEASE_DIR)/sluice sluice:$$version sluice:latest

# The library (headers, archives, CMake package, pkg-config files) and the
# binary under PREFIX (default /usr/local; sudo for a system prefix).
install: build
	@cmake --install $(RELEASE_DIR) --prefix $(PREFIX)

# The libFuzzer targets (fuzz/, docs/RELIABILITY.md): a clang build of their
# own in build-fuzz/, then each target for FUZZ_SECONDS (FUZZ_PARALLEL at a
# time); fails on any finding (saved in build-fuzz/findings/). CI (.ci/run)
# runs it after make test with FUZZ_SECONDS=30.
fuzz: deps
	@FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_PARALLEL=$(FUZZ_PARALLEL) FUZZ_JOBS=$(JOBS) scripts/fuzz.sh

bench: build
	@$(RELEASE_DIR)/bench/sluice_bench --benchmark_counters_tabular=true

# Limits under attack (docs/RELIABILITY.md): idle, slowloris and key-flood
# clients against the gateway, a few minutes; not part of `check`.
attack: build
	@bench/attack/run.sh $(RELEASE_DIR)

# The soak test (bench/soak/run.sh, docs/RELIABILITY.md "Soak"): sluice serve
# on Redis for SOAK_SECONDS under mixed traffic, reloads and Redis chaos.
soak: deps build
	@SOAK_SECONDS=$(SOAK_SECONDS) bench/soak/run.sh $(RELEASE_DIR)

# The demo upstream on 127.0.0.1:3000 and Sluice as a gateway on 127.0.0.1:8080
# (examples/quickstart.yaml); prints what to curl. Ctrl-C stops both.
run: build
	@scripts/run-demo.sh $(RELEASE_DIR)

format:
	@clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(RELEASE_DIR) $(TEST_DIR) build-fuzz
