#!/usr/bin/env bash
# The numerics tier (Note [Hugging Face models] in docs/notes.md): lrmoe's Qwen3-MoE and GLM-4.5
# models against transformers' own, both ways round (tests/hf/compare_with_transformers.py), in
# the pinned environment scripts/setup.sh --hf installs. Prints the table of largest differences;
# fails when a float32 one exceeds 1e-5 relative. `--report FILE` also writes the table there.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --hf
# An existing build is brought up to date as it is configured (CI's, with warnings as errors);
# configuring it again with other options would rebuild everything.
if [ -f build/CMakeCache.txt ]; then
  cmake --build build -j"$(nproc)"
else
  bash scripts/build.sh
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
.tools/transformers/bin/python tests/hf/compare_with_transformers.py \
  --lrmoe build/runner/lrmoe --work "$work" "$@"
