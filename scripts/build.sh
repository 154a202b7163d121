#!/usr/bin/env bash
# Installs the Debian packages lrmoe needs (scripts/setup.sh), then configures and builds it in
# build/ (Release). Safe to run again: set-up skips what is present and the build is incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# LRMOE_WERROR=ON (CI) makes warnings in lrmoe's own code errors.
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DLRMOE_WERROR="${LRMOE_WERROR:-OFF}"
cmake --build build -j"$(nproc)"
