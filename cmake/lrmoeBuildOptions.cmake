# Build options: how sources are batched (unity build), warnings (and whether they fail the
# build) and sanitizers.
# Included once by the top-level CMakeLists.txt, before any target is defined.

# A unity build compiles each target's sources in batches, so that LibTorch's precompiled header
# (~0.5 GB, ~14 s to load per translation unit) and its inline code are paid once per batch: a
# fresh build is ~3x faster. Internal helpers in anonymous namespaces must therefore have names
# unique within their target. Turn it off for one-file-at-a-time rebuilds while editing.
option(LRMOE_UNITY_BUILD "Compile each target's sources in batches (faster fresh builds)" ON)
if(LRMOE_UNITY_BUILD)
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE 12)
endif()

# Every target is position-independent code (CMAKE_POSITION_INDEPENDENT_CODE: plugins are shared
# libraries), and there GCC takes any function with external linkage to be replaceable at load
# time (ELF interposition), so it inlined none of ours into its callers: a score's key made once
# per pair, a search's range bounds, each a call in the threshold search's loops. Nothing of
# lrmoe's is meant to be interposed. C++ only: nvcc does not take the flag.
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fno-semantic-interposition>)
endif()

option(LRMOE_WERROR "Treat warnings in lrmoe's own code as errors (on in CI)" OFF)
set(LRMOE_SANITIZE "" CACHE STRING
    "Comma-separated sanitizers for every target, e.g. address,undefined (empty: none)")

# Our own code compiles warning-clean; LibTorch's headers are system headers so their warnings
# do not drown ours. Targets add these with target_compile_options(... ${LRMOE_WARNINGS}).
set(LRMOE_WARNINGS -Wall -Wextra -Wpedantic -Wno-unused-parameter)
if(LRMOE_WERROR)
  list(APPEND LRMOE_WARNINGS -Werror)
endif()

# Sanitizers instrument every target of the build (core, store, runner, plugins, tests), so a
# plugin's fault is caught inside the runner that loads it. Undefined behaviour aborts instead of
# printing and carrying on, so that a test fails on it. LibTorch itself is not instrumented.
if(LRMOE_SANITIZE)
  set(lrmoe_sanitize_flags -fsanitize=${LRMOE_SANITIZE} -fno-omit-frame-pointer)
  if(LRMOE_SANITIZE MATCHES "undefined")
    list(APPEND lrmoe_sanitize_flags -fno-sanitize-recover=undefined)
  endif()
  # GCC's maybe-uninitialized analysis gives false positives on instrumented code (here inside
  # LibTorch's inlined c10::optional<at::Generator>); the sanitizers check initialisation for real.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    list(APPEND LRMOE_WARNINGS -Wno-maybe-uninitialized)
  endif()
  add_compile_options(${lrmoe_sanitize_flags})
  add_link_options(${lrmoe_sanitize_flags})
  message(STATUS "lrmoe: sanitizers ${LRMOE_SANITIZE}")
endif()
