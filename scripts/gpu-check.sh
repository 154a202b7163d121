#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU, PyTorch 2.x under python3, CMake, ninja and
# g++, and no network. It builds lrmoe against the machine's own PyTorch, runs the tests labelled
# gpu and the fast ones, then the benchmarks, and prints their figures. A failing stage does not
# stop the later ones (a device lease is short): failed tests are run again verbosely, with the
# dynamic linker's bindings of a crashing test, and the exit status is non-zero at the end.
#
# Usage: scripts/gpu-check.sh DEBS [OUT]
#   DEBS: a folder of .deb files fetched beforehand by scripts/fetch-gpu-debs.sh (they are
#         unpacked into build-gpu/deps, nothing is installed), or a prefix already holding them
#         unpacked (its usr/include exists).
#   OUT:  where the logs go (default build-gpu/logs).
# Measured on one H200 with 16 cores (2026-12-04): build 150 s, gpu tests 6 s, fast tests 65 s.
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

failed=()
step "tests labelled gpu, then the fast ones"
ctest --test-dir "$build" -L gpu --output-on-failure -j4 2>&1 | tee "$out/tests-gpu.log" | tail -8 ||
  failed+=(gpu-tests)
if ! ctest --test-dir "$build" -L fast -j"$(nproc)" >"$out/tests-fast.log" 2>&1; then
  failed+=(fast-tests)
  grep -A400 "tests passed" "$out/tests-fast.log" | head -40
  # The failures again, one at a time, with their output (bounded: a lease is short).
  timeout 120 ctest --test-dir "$build" --rerun-failed --output-on-failure -j1 \
    >"$out/tests-fast-rerun.log" 2>&1 || true
  # A crash in a library function is often a symbol bound to another library's copy (Note
  # [LibTorch versions]): which libraries the tests load, and where the first crashing test's
  # std:: symbols bound.
  crashed=$(sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (SEGFAULT).*/\1/p' "$out/tests-fast.log" |
    grep -v , | head -1)  # a comma would split Catch's test spec
  if [ -n "$crashed" ]; then
    {
      echo "== ldd"; ldd "$build/tests/lrmoe_tests"
      echo "== bindings of std:: symbols while running: $crashed"
      LD_DEBUG=bindings "$build/tests/lrmoe_tests" "$crashed" 2>&1 | grep filesystem |
        sed 's/^ *[0-9]*:[[:space:]]*//' | sort -u | head -60
    } >"$out/crash-bindings.log" 2>&1 || true
  fi
fi

step "benchmarks"
lrmoe=$build/runner/lrmoe
# Runs a benchmark into $out/NAME.txt; a failure is noted and the next one runs.
bench() {
  local name=$1
  shift
  "$@" 2>&1 | tee "$out/$name.txt" || failed+=("$name")
}
bench bench-qwen3-mini-bf16 "$lrmoe" bench experiments/qwen3-mini.toml --steps 10 \
  --set train.device=cuda --set train.precision=bf16
bench bench-qwen3-mini-fp32 "$lrmoe" bench experiments/qwen3-mini.toml --steps 10 \
  --set train.device=cuda --set train.precision=fp32
gpus=$(python3 -c 'import torch; print(torch.cuda.device_count())')
if [ "$gpus" -ge 2 ]; then
  bench bench-parallel "$lrmoe" bench-parallel experiments/qwen3-mini.toml --processes 2 \
    --set train.device=cuda --set train.precision=bf16
else
  echo "all-to-all bandwidth: one GPU visible, not measured" | tee "$out/bench-parallel.txt"
fi
# The planners' CPU time per step against the modeled MoE step they plan, at full dimensions
# (issue: at most a tenth): here a replayed process has a core of its own up to 16 ranks, where
# the 2-core development machine shares each core among 8 to 32 of them. Each is bounded, so
# that a slow one cannot take the lease's last minutes.
# Every bundle: fixed ownership with memory to spare (within the budget it does not fit this
# skew), and LRMoE at 1.05x fixed where 1.0x does not fit (GLM-4.5-Air on 64 ranks).
for model in qwen3-30b-a3b glm45-air; do
  for ranks in 16 64; do
    roomier=()
    [ "$model-$ranks" = glm45-air-64 ] &&
      roomier=(--variant "lrmoe-1.05x:policies.bundle=lrmoe,policies.planning=scalable,cluster.memory_per_rank=1.05x fixed")
    bench "plan-$model-$ranks" timeout 90 "$lrmoe" replay "experiments/paper/$model-replay.toml" \
      --skew zipf:0.5 --steps 3 --set cluster.ranks=$ranks --processes $ranks \
      --variant "fixed:policies.bundle=fixed,cluster.memory_per_rank=100x fixed,policies.planning=scalable" \
      --variant "symi:policies.bundle=symi,policies.planning=scalable" \
      --variant "lrmoe:policies.bundle=lrmoe,policies.planning=scalable" "${roomier[@]}"
  done
done
# The allocator's peak against the memory model's, for Qwen3-30B-A3B's busiest rank (about 70 GiB).
bench replay-allocate "$lrmoe" replay experiments/paper/qwen3-30b-a3b-replay.toml \
  --skew zipf:0.5 --steps 1 --variant lrmoe --allocate
step "done; logs in $out"
if [ ${#failed[@]} -gt 0 ]; then
  echo "gpu-check: failed: ${failed[*]}" >&2
  exit 1
fi
