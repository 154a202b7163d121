#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU, PyTorch 2.x under python3, CMake, ninja and
# g++, and no network. It builds lrmoe against the machine's own PyTorch, runs the tests labelled
# gpu (and the fast ones), then the benchmarks, and prints their figures.
#
# Usage: scripts/gpu-check.sh DEBS [OUT]
#   DEBS: a folder of .deb files fetched beforehand by scripts/fetch-gpu-debs.sh (they are
#         unpacked into build-gpu/deps, nothing is installed), or a prefix already holding them
#         unpacked (its usr/include exists).
#   OUT:  where the logs go (default build-gpu/logs).
# Finishes in about 5 minutes on one H200 (build 2-3, tests 1, benchmarks 1).
set -euo pipefail
cd "$(dirname "$0")/.."
debs=${1:?usage: scripts/gpu-check.sh DEBS [OUT]}
build=build-gpu
out=${2:-$build/logs}
mkdir -p "$build" "$out"
started=$SECONDS
step() { echo "== gpu-check: $* ($((SECONDS - started)) s)"; }

step "dependencies from $debs"
if [ -d "$debs/usr/include" ]; then
  prefix=$(cd "$debs" && pwd)
else
  prefix=$PWD/$build/deps
  mkdir -p "$prefix"
  for deb in "$debs"/*.deb; do
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$deb" "$prefix"
    else
      t=$(mktemp -d)
      (cd "$t" && ar x "$(realpath "$OLDPWD/$deb")" && tar -xf data.tar.* -C "$prefix")
      rm -rf "$t"
    fi
  done
fi
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
python3 -c 'import torch; print("PyTorch", torch.__version__, "CUDA", torch.version.cuda,
      "GPUs", torch.cuda.device_count(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")' \
  | tee "$out/machine.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$out/machine.txt" 2>&1 || true

step "configure and build against python3's PyTorch"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DLRMOE_TORCH_PYTHON="$(command -v python3)" \
  -DCMAKE_PREFIX_PATH="$prefix/usr" >"$out/configure.log" 2>&1 ||
  { tail -30 "$out/configure.log"; exit 1; }
cmake --build "$build" -j"$(nproc)" >"$out/build.log" 2>&1 || { grep -m20 -B2 -A6 "error" "$out/build.log"; exit 1; }

step "tests labelled gpu, then the fast ones"
ctest --test-dir "$build" -L gpu --output-on-failure -j4 2>&1 | tee "$out/tests-gpu.log" | tail -8
ctest --test-dir "$build" -L fast -j"$(nproc)" 2>&1 | tee "$out/tests-fast.log" | tail -4

step "benchmarks"
lrmoe=$build/runner/lrmoe
"$lrmoe" bench experiments/qwen3-mini.toml --steps 10 \
  --set train.device=cuda --set train.precision=bf16 2>&1 | tee "$out/bench-qwen3-mini-bf16.txt"
"$lrmoe" bench experiments/qwen3-mini.toml --steps 10 \
  --set train.device=cuda --set train.precision=fp32 2>&1 | tee "$out/bench-qwen3-mini-fp32.txt"
gpus=$(python3 -c 'import torch; print(torch.cuda.device_count())')
if [ "$gpus" -ge 2 ]; then
  "$lrmoe" bench-parallel experiments/qwen3-mini.toml --processes 2 \
    --set train.device=cuda --set train.precision=bf16 2>&1 | tee "$out/bench-parallel.txt"
else
  echo "all-to-all bandwidth: one GPU visible, not measured" | tee "$out/bench-parallel.txt"
fi
# The allocator's peak against the memory model's, for Qwen3-30B-A3B's busiest rank (about 70 GiB).
"$lrmoe" replay experiments/paper/qwen3-30b-a3b-replay.toml --skew zipf:0.5 --steps 1 \
  --variant lrmoe --allocate 2>&1 | tee "$out/replay-allocate.txt"
step "done; logs in $out"
