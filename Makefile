# The two commands a newcomer needs: `make demo` and `make test`. Everything else is CMake.
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
CTEST_ARGS ?=

.PHONY: all setup configure build test demo clean

all: build

setup:
	@./scripts/setup.sh

configure: setup
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure --timeout 900 -j $(JOBS) $(CTEST_ARGS)

demo: build
	@./scripts/demo.sh $(BUILD_DIR)

clean:
	@rm -rf $(BUILD_DIR)
