#!/usr/bin/env bash
# Installs what biofm needs to build on Debian/Ubuntu (skips what is already there).
set -euo pipefail
pkgs=(cmake ninja-build g++ ccache libopenblas-dev libyaml-cpp-dev nlohmann-json3-dev zlib1g-dev libgtest-dev
      clang libclang-rt-dev libomp-dev)  # clang: the libFuzzer targets (fuzz/, .ci/run)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi
# The CUDA build uses cuDNN's header-only frontend, which ships on PyPI.
if command -v nvcc >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1; then
  # (--break-system-packages is for Debian's own python3, which refuses plain pip installs)
  python3 -c "import cudnn" >/dev/null 2>&1 || \
    python3 -m pip install -q nvidia-cudnn-frontend >/dev/null 2>&1 || \
    python3 -m pip install -q --break-system-packages nvidia-cudnn-frontend >/dev/null 2>&1 || \
    echo "note: could not pip install nvidia-cudnn-frontend; configure with -DBIOFM_CUDA=OFF for a CPU-only build"
fi
