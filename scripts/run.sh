#!/usr/bin/env bash
# README command (a): set up, build, and train the default experiment, recording it in lrmoe.db.
# Extra arguments go to `lrmoe run` (for example an experiment file or --set overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec ./build/runner/lrmoe run "$@"
