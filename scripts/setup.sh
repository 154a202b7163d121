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
  nlohmann-json3-dev      # Hugging Face config.json, safetensors headers, tokenizer.json
  libsqlite3-dev sqlite3  # results store
  libspdlog-dev libfmt-dev
  libcli11-dev
  catch2
  libboost-dev            # Boost.DLL (header-only, used with std::filesystem)
  libssl-dev              # SHA-256 of plugin libraries and resolved experiments
  clang-format            # scripts/format.sh (CI checks the formatting)
  python3-matplotlib      # lrmoe compare --plot (notebooks/plot_comparison.py)
  python3-venv python3-pip  # .tools/tensorboard: TensorBoard's own reader for lrmoe export's test
)

# Options:
#   --notebooks  adds what the notebooks in notebooks/ need.
#   --fuzz       adds clang and its libFuzzer runtime, for scripts/fuzz.sh.
#   --corpus     adds what scripts/prepare-corpus.sh needs: SentencePiece's Python module (the
#                BPE tokenizer) and pod2text (perl).
#   --hf         installs transformers with PyTorch (PyPI, pinned) into .tools/transformers, the
#                environment of the numerics tier (scripts/hf-numerics.sh) and of
#                scripts/prepare-corpus.sh's Hugging Face tokenizers; about 4.5 GB.
#   --cuda       also installs PyPI's PyTorch (a CUDA build whose LibTorch runs on the CPU where no
#                GPU is visible) into the virtual environment build-cuda/venv and configures
#                build-cuda/ against its LibTorch (the `cuda` preset; Note [LibTorch versions] in
#                docs/notes.md). LRMOE_PYTORCH_VERSION pins it (default: the GPU machines' 2.11.0).
cuda=false
hf=false
for option in "$@"; do
  case "$option" in
    --notebooks)
      packages+=(jupyter-nbconvert python3-nbconvert python3-ipykernel python3-pandas) ;;
    --fuzz)
      packages+=(clang libclang-rt-14-dev) ;;
    --corpus)
      packages+=(python3-sentencepiece perl) ;;
    --hf)
      hf=true
      packages+=(python3-venv python3-pip) ;;
    --cuda)
      cuda=true
      packages+=(python3-venv python3-pip) ;;
    *)
      echo "setup: unknown option '$option'; the options are --notebooks, --fuzz, --corpus, --hf and --cuda" >&2
      exit 1 ;;
  esac
done

# A PyTorch install that runs out of disk half way leaves a broken environment behind and pip's
# "No space left on device" in the middle of CI's log; refuse before starting instead.
require_free_gb() {
  local dir=$1 gb=$2 what=$3
  mkdir -p "$dir"
  local free_kb
  free_kb=$(df -Pk "$dir" | awk 'NR == 2 {print $4}')
  if [ "$free_kb" -lt $((gb * 1024 * 1024)) ]; then
    echo "setup: $what needs about $gb GB free in $dir, which has $((free_kb / 1024 / 1024)) GB; free some disk and rerun" >&2
    exit 1
  fi
}

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# TensorBoard (PyPI, pinned; Debian has none) in its own environment, beside Debian's numpy:
# the test of `lrmoe export` reads the event files back with TensorBoard's own reader.
tensorboard_version=2.18.0
tools="$(cd "$(dirname "$0")/.." && pwd)/.tools/tensorboard"
if [ "$("$tools/bin/python" -c 'import tensorboard; print(tensorboard.__version__)' 2>/dev/null)" \
     = "$tensorboard_version" ]; then
  echo "setup: TensorBoard $tensorboard_version present in $tools"
else
  echo "setup: installing TensorBoard $tensorboard_version from PyPI into $tools"
  python3 -m venv --system-site-packages "$tools"
  "$tools/bin/python" -m pip install --quiet --disable-pip-version-check \
    "tensorboard==$tensorboard_version"
fi

# transformers and the PyTorch it computes with (PyPI, pinned) in their own environment: the
# reference implementation lrmoe's models are checked against, never fetched at test time.
if $hf; then
  root="$(cd "$(dirname "$0")/.." && pwd)"
  venv="$root/.tools/transformers"
  pins=(torch==2.11.0 transformers==5.25.0 safetensors==0.8.0 tokenizers==0.23.3)
  have=$("$venv/bin/python" -c 'import torch, transformers, safetensors, tokenizers as t
print(" ".join(["torch==" + torch.__version__.split("+")[0], "transformers==" + transformers.__version__,
                "safetensors==" + safetensors.__version__, "tokenizers==" + t.__version__]))' \
           2>/dev/null || true)
  if [ "$have" = "${pins[*]}" ]; then
    echo "setup: ${pins[*]} present in $venv"
  else
    require_free_gb "$root/.tools" 6 "installing ${pins[*]}"
    echo "setup: installing ${pins[*]} from PyPI into $venv (about 4.5 GB with PyTorch's CUDA libraries)"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}"
  fi
fi

if $cuda; then
  cd "$(dirname "$0")/.."
  version=${LRMOE_PYTORCH_VERSION:-2.11.0}
  venv=build-cuda/venv
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  installed=$("$venv/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])' \
                2>/dev/null || true)
  if [ "$installed" = "$version" ]; then
    echo "setup: PyTorch $version present in $venv"
  else
    require_free_gb build-cuda 6 "installing PyTorch $version"
    echo "setup: installing PyTorch $version from PyPI into $venv (about 4.5 GB with its CUDA libraries)"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "torch==$version"
  fi
  cmake --preset cuda -DLRMOE_WERROR="${LRMOE_WERROR:-OFF}" >/dev/null
  echo "setup: build-cuda/ configured against $("$venv/bin/python" -c 'import torch; print(torch.__version__)')"
fi
