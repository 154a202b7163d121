#!/usr/bin/env bash
# Runs the notebooks of notebooks/ as CI does: checks that none is committed with output cells,
# makes a small database with a small sweep (experiments/sweeps/tiny-bundles.toml: 9 runs of the
# tiny model), then executes every notebook headless on it with Debian's nbconvert. Any error in
# a cell fails the script. Needs `bash scripts/setup.sh --notebooks` and a build (LRMOE: the lrmoe
# program, default build/runner/lrmoe).
set -euo pipefail
cd "$(dirname "$0")/.."
lrmoe=$(realpath "${LRMOE:-build/runner/lrmoe}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

/usr/bin/python3 - notebooks/*.ipynb <<'PY'
import json, sys
dirty = []
for path in sys.argv[1:]:
    cells = json.load(open(path))["cells"]
    if any(c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count"))
           for c in cells):
        dirty.append(path)
if dirty:
    sys.exit("notebooks: committed with output cells: " + ", ".join(dirty) +
             "; clear them (jupyter nbconvert --clear-output --inplace FILE)")
PY

"$lrmoe" sweep experiments/sweeps/tiny-bundles.toml --db "$work/sweep.db" --jobs 2 \
  >"$work/sweep.log" 2>&1 || { cat "$work/sweep.log"; exit 1; }
for notebook in notebooks/*.ipynb; do
  echo "notebooks: executing $notebook"
  LRMOE="$lrmoe" LRMOE_DB="$work/sweep.db" PYDEVD_DISABLE_FILE_VALIDATION=1 \
    timeout 600 jupyter nbconvert --to notebook --execute --output-dir "$work" "$notebook" \
    --log-level WARN
done
echo "notebooks: all executed"
