#!/usr/bin/env bash
# Downloads, on a Debian machine with package access, the .deb files of the headers and small
# libraries lrmoe needs besides LibTorch, so that they can be carried to a GPU machine that can
# install nothing (scripts/gpu-check.sh unpacks them there). Usage: fetch-gpu-debs.sh DIR
# (DIR: a folder inside the checkout that git ignores, such as .gpu-debs; about 15 MB).
set -euo pipefail
dir=${1:?usage: scripts/fetch-gpu-debs.sh DIR}
packages=(
  libtomlplusplus-dev libtomlplusplus3 libsqlite3-dev libsqlite3-0 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  libcli11-dev catch2 libboost1.74-dev libssl-dev libssl3
  libgloo-dev  # ProcessGroupGloo's headers: PyPI's PyTorch ships Gloo's library, not its headers
)
mkdir -p "$dir"
if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -print -quit 2>/dev/null)" ]; then
  apt-get update -qq
fi
(cd "$dir" && apt-get download "${packages[@]}" >/dev/null)
echo "fetch-gpu-debs: ${#packages[@]} packages in $dir ($(du -sh "$dir" | cut -f1))"
