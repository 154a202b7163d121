#!/usr/bin/env bash
# Formats every C++ file of the repository with .clang-format (clang-format 14, Debian 12's).
# `--check` changes nothing and fails, listing the files, when any would change (CI runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.hpp')
if [ "${1:-}" = "--check" ]; then
  unformatted=()
  for f in "${files[@]}"; do
    if ! clang-format --style=file "$f" | cmp -s - "$f"; then unformatted+=("$f"); fi
  done
  if [ ${#unformatted[@]} -gt 0 ]; then
    echo "format: ${#unformatted[@]} file(s) differ from .clang-format; run bash scripts/format.sh:" >&2
    printf '  %s\n' "${unformatted[@]}" >&2
    exit 1
  fi
  echo "format: all ${#files[@]} C++ files match .clang-format"
else
  clang-format --style=file -i "${files[@]}"
fi
