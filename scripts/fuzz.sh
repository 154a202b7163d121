#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ with clang (AddressSanitizer and
# UndefinedBehaviorSanitizer) in build-fuzz/, seeds their corpora from experiments/ and a few
# hand-made inputs, and runs each target for SECONDS (default 30). A finding (a crash, a
# sanitizer report, an uncaught exception, a hang over 10 s) is kept in build-fuzz/findings/ and
# fails the script. Corpora grow in build-fuzz/corpus/ and are reused by the next run; a long
# run is `bash scripts/fuzz.sh 3600`. Needs `bash scripts/setup.sh --fuzz`.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
# libFuzzer reads -max_total_time=0 as "no limit".
if ! [[ $seconds =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: SECONDS must be a whole number of seconds above 0, got '$seconds'" >&2
  exit 2
fi
root=$PWD
build=build-fuzz

CC=clang CXX=clang++ cmake -S tests/fuzz -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)"

seed() {  # seed TARGET: the target's corpus folder, created with its seeds on the first run
  local corpus="$build/corpus/$1"
  if [ ! -d "$corpus" ]; then
    mkdir -p "$corpus"
    case "$1" in
      experiment)
        cp experiments/*.toml experiments/paper/*.toml "$corpus/"
        printf 'extends = "base.toml"\n[train]\nlr = 1e-3\n' >"$corpus/extends.toml" ;;
      set_override)
        printf 'train.lr=1e-3\nmodel.num_layers=2\n' >"$corpus/plain"
        printf 'policies.bundle=lrmoe\npolicies.placement.lrmoe.keep_fraction=0.5\n' >"$corpus/plugin"
        printf 'cluster.memory_per_rank=0.8x fixed\nstore.path=a.db\n' >"$corpus/text"
        # A finding: a parameter name that must be written quoted.
        printf 'policies.placement.#( x=1\n' >"$corpus/quoted_key" ;;
      token_file)
        printf '\x20\x01\x00\x02\x00\x03\x00\x04\x00\x05\x00\x06\x00\x07\x00\x08\x00' >"$corpus/uint16"
        printf '\x21\x01\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00\x04\x00\x00\x00' >"$corpus/uint32" ;;
      sweep_spec)
        cp experiments/sweeps/*.toml experiments/studies/corpus-*.toml "$corpus/"
        printf 'experiment = "b.toml"\n[[axis]]\nvariants = [\n  { label = "x",\n    "a.b" = 1, },\n]\n' \
          >"$corpus/multiline" ;;
      checkpoint_file)  # recipes of an archive with every key, and a checksum that is wrong
        printf '\x01\x1f\x00\x09\x00\x00\x02\x00\x00\x02\x02\x03\x01\x00\x01\x04\x01' >"$corpus/full"
        printf '\x00%s  step-00000001.pt\n' "$(printf '0%.0s' {1..64})" >"$corpus/wrong_sum" ;;
      hf_files)  # a safetensors file of one tensor (first byte even), the shipped config.json files
        printf '\x00\x36\x00\x00\x00\x00\x00\x00\x00{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}\x00\x00\x80\x3f' \
          >"$corpus/one_tensor"
        for model in experiments/models/*/config.json; do
          { printf '\x01'; cat "$model"; } >"$corpus/$(basename "$(dirname "$model")")"
        done ;;
      load_files)  # a CSV of loads (first byte even), a .npy of int32 ids [2, 1, 2] (odd)
        printf '\x00step,layer,expert,pairs\n1,0,0,5\n1,0,1,3\n2,0,0,1\n2,0,1,1\n' >"$corpus/csv"
        { printf '\x03\x93NUMPY\x01\x00\x73\x00'
          printf "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 1, 2), }%*s\n" 52 ''
          printf '\x00\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00'; } >"$corpus/npy" ;;
      plugin_outputs)
        seq -s ' ' 1 120 >"$corpus/counting"
        printf '\x03\x01\x03\x06\x00\x00\x00\x00\x01\x01\x00\x01\x02\x00\x02\x01' >"$corpus/plan"
        # A finding: an instance of expert -1, refused while the instance table is built, whose
        # unwinding crashed (core/pipeline/instance_table.cpp says when).
        { printf '\x03\x03\xff\x03\x00\x00\x01\x01'; printf '\xc4%.0s' {1..54}
          printf '\x00\x01\x02\x00\xff\xff\xff\xff\xff\xff\xff\x03\x06\x01\x48\x01\x02\x00'
          printf '\x00\x00\x00\x64\x01\x02\x01\x00\xba\x01'; } >"$corpus/expert_minus_one" ;;
    esac
  fi
  echo "$corpus"
}

status=0
mkdir -p "$build/findings"
for target in experiment set_override token_file plugin_outputs sweep_spec checkpoint_file hf_files \
    load_files; do
  corpus=$(seed "$target")
  findings="$build/findings/$target"
  mkdir -p "$findings"
  echo "== fuzz: $target for ${seconds} s (corpus $(ls "$corpus" | wc -l) inputs)"
  # LibTorch's own allocations at exit are not leaks of the code under test.
  if ! ASAN_OPTIONS=detect_leaks=0 "$build/fuzz_$target" -max_total_time="$seconds" \
      -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$findings/" \
      "$corpus" 2>"$build/fuzz_$target.log"; then
    echo "fuzz: $target found a problem; see $build/fuzz_$target.log and $findings/" >&2
    tail -n 30 "$build/fuzz_$target.log" >&2
    status=1
  fi
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added)' "$build/fuzz_$target.log" |
    sed "s/^/  $target /" || true
done
cd "$root"
exit $status
