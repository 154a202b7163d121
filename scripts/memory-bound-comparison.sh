#!/usr/bin/env bash
# The memory-bound comparison of the measurement issue, in one command: fixed ownership, SYMI and
# LRMoE on qwen3-mini and glm45-mini under a budget that binds (experiments/*-bound.toml), fixed
# ownership with memory to spare as the memory reference, SYMI as published and its harness
# variant fit to budget (Note [SYMI as published]), and SYMI at its paper's slot ratio; then one table of what each run measured (scripts/memory-bound-comparison.sql).
# Usage: bash scripts/memory-bound-comparison.sh [DB]   (default compare-bound.db; about 30 min on 2 cores)
# A run that does not fit its budget fails at step 1 and is recorded as failed: that is a result.
set -uo pipefail
cd "$(dirname "$0")/.."
db="${1:-compare-bound.db}"
lrmoe=./build/runner/lrmoe
[ -x "$lrmoe" ] || bash scripts/build.sh

for model in qwen3-mini glm45-mini; do
  exp="experiments/$model-bound.toml"
  "$lrmoe" run "$exp" --set policies.bundle=fixed --db "$db" || echo "($model fixed: does not fit, recorded as failed)"
  "$lrmoe" run "$exp" --set policies.bundle=symi --db "$db"
  "$lrmoe" run "$exp" --set policies.bundle=symi --set policies.placement.symi.slots=all \
    --set policies.placement.symi.fit_budget=true --db "$db"
  "$lrmoe" run "$exp" --set policies.bundle=lrmoe --db "$db"
  "$lrmoe" run "experiments/$model.toml" --set policies.bundle=fixed --set cluster.memory_per_rank=80GiB \
    --set experiment.name="$model-fixed-unbound" --db "$db"
done
"$lrmoe" run experiments/qwen3-mini-symi-paper.toml --db "$db"

"$lrmoe" query --db "$db" "$(cat scripts/memory-bound-comparison.sql)"
