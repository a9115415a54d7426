# The two commands a newcomer needs: `make demo` and `make test`. Everything else is CMake.
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
CTEST_ARGS ?=
# Sanitizer trees (CMakePresets.json, docs/testing.md) that `make test` builds next to the main
# tree and whose `sanitize` tests it runs in the same ctest run; `make test SANITIZERS=` skips them.
SANITIZERS ?= asan tsan

.PHONY: all setup configure build sanitize test demo clean

all: build

setup:
	@./scripts/setup.sh

configure: setup
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

sanitize: setup
	@for s in $(SANITIZERS); do \
	  cmake --preset $$s >/dev/null && cmake --build --preset $$s -j $(JOBS) || exit 1; \
	done

test: build sanitize
	@cd $(BUILD_DIR) && RECCL_TEST_SANITIZE_TREES="$(foreach s,$(SANITIZERS),$(CURDIR)/build-$(s))" \
	  ctest --output-on-failure --timeout 900 -j $(JOBS) $(CTEST_ARGS)

demo: build
	@./scripts/demo.sh $(BUILD_DIR)

clean:
	@rm -rf $(BUILD_DIR) $(foreach s,$(SANITIZERS),build-$(s))
