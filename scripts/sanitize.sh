#!/usr/bin/env bash
# The sanitize preset (AddressSanitizer + UndefinedBehaviorSanitizer on every target: core,
# runner, plugins, tests) built in build-sanitize/, then its fast tests run with the preset's
# sanitizer options and tests/sanitizers/ suppressions. A third full build does not fit CI's time
# on 2 cores, so this is its own command: run it after changing index arithmetic, raw pointers or
# lifetimes (about 35 minutes on 2 cores from nothing; incremental after that).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset sanitize -DLRMOE_WERROR=ON >/dev/null
cmake --build --preset sanitize -j"$(nproc)"
ctest --preset sanitize -j"$(nproc)" "$@"
