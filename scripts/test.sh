#!/usr/bin/env bash
# README command (b): set up, build, and run the whole test suite (labels fast and slow).
# Pass `-L fast` to run only the fast tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
