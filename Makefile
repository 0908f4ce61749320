# Front door: make | make test | make demo | make bench. Each checks (and, where missing,
# installs) the Debian packages first, so a fresh machine needs no other step.
BUILD ?= build
PRESET ?= release
JOBS ?= $(shell nproc)
NEXUS := $(BUILD)/nexus
SHARED ?= ../shared
# The default demo model ships in the repo: trained by nexus itself on tinyshakespeare
# (docs/TRAINING.md has the exact commands).
DEMO_MODEL ?= models/shakespeare-1m.gguf
DEMO_ARGS ?= -p "ROMEO:" -n 100 --temp 0.8 --seed 42

.PHONY: all deps build test demo bench fuzz clean

all: build

# Debian packages the build and tests need (idempotent; CUDA is preinstalled on these machines).
DEB_PACKAGES := build-essential cmake ninja-build libgtest-dev libgmock-dev libbenchmark-dev \
  nlohmann-json3-dev libcli11-dev libopenblas-dev pkg-config clang libclang-rt-14-dev \
  libcpp-httplib-dev prometheus openmpi-bin libopenmpi-dev libfaiss-dev libhnswlib-dev \
  libhiredis-dev libssl-dev redis-server nginx-light libnginx-mod-http-js python3 curl
# Not root: through sudo when there is one, else an error that lists the packages to install.
deps:
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -z "$$missing" ]; then exit 0; fi; \
	echo "deps: installing:$$missing"; \
	if [ "$$(id -u)" = 0 ]; then sudo=""; \
	elif command -v sudo >/dev/null 2>&1; then sudo="sudo"; \
	else echo "deps: error: not root and no sudo; install:$$missing" >&2; exit 1; fi; \
	$$sudo apt-get update -qq && \
	DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $$missing || \
	{ echo "deps: error: apt-get could not install:$$missing" >&2; exit 1; }
	@# OpenAI's Node SDK for the server's conformance test (pinned in tests/node/package-lock.json).
	@if [ ! -d tests/node/node_modules/openai ]; then \
	  if command -v npm >/dev/null 2>&1; then \
	    npm ci --prefix tests/node --no-audit --no-fund --silent || \
	    echo "deps: warning: npm could not install tests/node; the SDK conformance test will skip" >&2; \
	  else echo "deps: warning: no npm; the SDK conformance test will skip" >&2; fi; \
	fi

$(BUILD)/build.ninja: | deps
	cmake --preset $(PRESET)

# Configure every time (cheap once cached) so the commit recorded in benchmark output is current.
build: deps $(BUILD)/build.ninja
	@cmake --preset $(PRESET) > /dev/null
	cmake --build $(BUILD) -j $(JOBS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

demo: build
	@if [ -f "$(DEMO_MODEL)" ]; then \
	  $(NEXUS) run -m $(DEMO_MODEL) $(DEMO_ARGS); \
	else \
	  echo "make demo: model '$(DEMO_MODEL)' not found; run 'make demo DEMO_MODEL=path/to/model.gguf'"; \
	  exit 1; \
	fi

bench: build
	$(BUILD)/nexus_micro_bench

# Fuzz the GGUF reader for FUZZ_SECONDS (libFuzzer, clang; see docs/GGUF.md). `make test` runs a
# 15-second version of the same.
FUZZ_SECONDS ?= 300
fuzz:
	NEXUS_FUZZ_JOBS=$(JOBS) tests/fuzz/run_fuzz.sh $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) build-debug build-fuzz
