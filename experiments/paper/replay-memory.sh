#!/usr/bin/env bash
# Reproduction (b): replay at full Qwen3-30B-A3B and GLM-4.5-Air dimensions on 16 ranks, the
# memory of LRMoE against fixed ownership (and SYMI), without training. Each model's variants are
# recorded in DB as the sweep "<model>-replay" (lrmoe compare --sweep ... reads them).
#
#   bash experiments/paper/replay-memory.sh [DB]        (default: paper-replay.db; ~1 minute)
#
# Routing: a Zipf skew of exponent 0.5 over the 128 experts (busiest expert about 6x the mean;
# Note [Replay]). The budget is each file's "1.0x fixed". Variants:
#   fixed            fixed ownership within the budget (does it fit?)
#   fixed-unbounded  fixed ownership with room to spare: what it needs
#   symi             SYMI as published (Note [SYMI as published]): capacity factor 1.0 over the
#                    most slots per rank that fit the budget
#   symi-fit         a harness variant: SYMI on every slot, its slot capacity lowered until it
#                    fits (forward drops)
#   lrmoe            LRMoE with its defaults (at most 4 replicas per layer)
#   lrmoe-r64        LRMoE allowed 64 replicas per layer, the spare slots SYMI fills
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lrmoe=${LRMOE:-$here/../../build/runner/lrmoe}
db=${1:-paper-replay.db}
for model in qwen3-30b-a3b glm45-air; do
  "$lrmoe" replay "$here/$model-replay.toml" --skew zipf:0.5 --steps 3 --db "$db" \
    --record "$model-replay" \
    --variant fixed \
    --variant "fixed-unbounded:policies.bundle=fixed,cluster.memory_per_rank=100x fixed" \
    --variant "symi:policies.bundle=symi" \
    --variant "symi-fit:policies.bundle=symi,policies.placement.symi.slots=all,policies.placement.symi.fit_budget=true" \
    --variant lrmoe \
    --variant "lrmoe-r64:policies.bundle=lrmoe,policies.placement.lrmoe.max_replicas=64"
  echo
done
