#!/usr/bin/env bash
# Installs every Debian package lrmoe needs to build, test and run. Idempotent: packages that are
# already installed are skipped, and apt is not touched at all when nothing is missing.
set -euo pipefail

packages=(
  cmake g++ make pkg-config git
  libtorch-dev            # LibTorch 1.13 (CPU) with c10d
  libgloo-dev             # Gloo, c10d's CPU collective backend
  libopenblas0-pthread    # optimized BLAS: without it LibTorch uses the ~30x slower reference BLAS
  libtomlplusplus-dev     # TOML experiments
  libsqlite3-dev sqlite3  # results store
  libspdlog-dev libfmt-dev
  libcli11-dev
  catch2
  libboost-dev            # Boost.DLL (header-only, used with std::filesystem)
  libssl-dev              # SHA-256 of plugin libraries and resolved experiments
  clang-format            # scripts/format.sh (CI checks the formatting)
)

# `--notebooks` adds what the notebooks in notebooks/ need.
if [ "${1:-}" = "--notebooks" ]; then
  packages+=(jupyter-nbconvert python3-nbconvert python3-ipykernel python3-pandas python3-matplotlib)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
