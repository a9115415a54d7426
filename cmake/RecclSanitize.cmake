# RECCL_SANITIZE: a sanitizer build tree (CMakePresets.json `asan`, `tsan`; docs/testing.md).
#   asan  AddressSanitizer (with LeakSanitizer) + UndefinedBehaviorSanitizer; any UB report aborts
#   tsan  ThreadSanitizer
# Such a tree builds only what its tests need and registers only the tests marked SANITIZE in
# tests/ (label `sanitize`, names prefixed `<sanitizer>.`), so that CI can afford one of each.
# The flags live here, keyed by the one variable, so a preset and a hand-made tree cannot differ.
set(RECCL_SANITIZE "" CACHE STRING "sanitizer build: asan (ASan + UBSan), tsan, or empty for none")
set_property(CACHE RECCL_SANITIZE PROPERTY STRINGS "" asan tsan)

set(RECCL_SANITIZER_DEFAULTS "")
if(RECCL_SANITIZE STREQUAL "")
  return()
elseif(RECCL_SANITIZE STREQUAL "asan")
  set(sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined)
elseif(RECCL_SANITIZE STREQUAL "tsan")
  set(sanitize_flags -fsanitize=thread)
else()
  message(FATAL_ERROR "RECCL_SANITIZE='${RECCL_SANITIZE}': expected asan, tsan or empty")
endif()
# Frame pointers: the reports' stacks come from the fast unwinder.
foreach(flag ${sanitize_flags} -fno-omit-frame-pointer)
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:${flag}>)
endforeach()
# Host code only: nvcc takes none of these flags, and the device tests need a GPU anyway.
set(RECCL_CUDA off CACHE STRING "Build the CUDA path: auto (where nvcc is found), on, off" FORCE)
add_link_options(${sanitize_flags})
# -Og and line tables (-g1) instead of RelWithDebInfo's -O2 -g: a report needs functions and
# lines only, the instrumented compile is what CI pays twice, and -Og compiles in less time than
# -O1 while the trees' tests run as fast (docs/results/ci-time.md).
foreach(lang C CXX)
  set(CMAKE_${lang}_FLAGS_RELWITHDEBINFO "-Og -g1 -DNDEBUG")
endforeach()
# Every test of the tree is a sanitizer test (only SANITIZE tests are registered, tests/).
set_property(DIRECTORY PROPERTY LABELS sanitize)
# Run-time options (and any suppression, each with its reason), compiled into the tree's test
# programs and workers: the same whether ctest, a developer or `reccl testbed run` starts them.
set(RECCL_SANITIZER_DEFAULTS ${PROJECT_SOURCE_DIR}/tests/sanitizer_defaults.cpp)
message(STATUS "sanitizer build: ${RECCL_SANITIZE} (${sanitize_flags})")
