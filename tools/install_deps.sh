#!/usr/bin/env bash
# Installs what biofm needs to build on Debian/Ubuntu (skips what is already there).
set -euo pipefail
pkgs=(cmake ninja-build g++ ccache libopenblas-dev libyaml-cpp-dev nlohmann-json3-dev zlib1g-dev libzstd-dev libgtest-dev
      clang libclang-rt-dev libomp-dev  # clang: the libFuzzer targets (fuzz/, .ci/run)
      libgloo-dev  # Gloo: multi-process training on CPUs
      pybind11-dev python3-dev python3-numpy)  # the Python package (python/)
# The tests render `biofm report` pages in a headless browser (tests/e2e/frontdoor_test.cpp).
# BIOFM_NO_BROWSER=1 leaves it out (a build-only machine, e.g. the Dockerfile).
[ "${BIOFM_NO_BROWSER:-0}" = 1 ] || pkgs+=(chromium)
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
# The CUDA build uses cuDNN's header-only frontend, which ships on PyPI (pinned: the version
# the build was last checked with; change it here and nowhere else).
CUDNN_FRONTEND_VERSION=1.32.0
NCCL_VERSION=2.28.9  # NCCL headers and library for the CUDA build (nvidia-nccl-cu13)
# CUTLASS headers (the fused GEMM epilogues); --no-deps: only the headers are used, not its
# Python interface's dependencies.
CUTLASS_VERSION=4.2.0.0
if command -v nvcc >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1; then
  # (--break-system-packages is for Debian's own python3, which refuses plain pip installs)
  have=$(python3 -c "import importlib.metadata as m; print(m.version('nvidia-cudnn-frontend'))" 2>/dev/null || true)
  if [ "$have" != "$CUDNN_FRONTEND_VERSION" ]; then
    [ -n "$have" ] && echo "note: replacing nvidia-cudnn-frontend $have with $CUDNN_FRONTEND_VERSION"
    python3 -m pip install -q "nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION" >/dev/null 2>&1 || \
      python3 -m pip install -q --break-system-packages "nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION" >/dev/null 2>&1 || \
      echo "note: could not pip install nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION; configure with -DBIOFM_CUDA=OFF for a CPU-only build"
  fi
  have=$(python3 -c "import importlib.metadata as m; print(m.version('nvidia-nccl-cu13'))" 2>/dev/null || true)
  if [ "$have" != "$NCCL_VERSION" ]; then
    python3 -m pip install -q "nvidia-nccl-cu13==$NCCL_VERSION" >/dev/null 2>&1 || \
      python3 -m pip install -q --break-system-packages "nvidia-nccl-cu13==$NCCL_VERSION" >/dev/null 2>&1 || \
      echo "note: could not pip install nvidia-nccl-cu13==$NCCL_VERSION; configure with -DBIOFM_CUDA=OFF for a CPU-only build"
  fi
  have=$(python3 -c "import importlib.metadata as m; print(m.version('nvidia-cutlass'))" 2>/dev/null || true)
  if [ "$have" != "$CUTLASS_VERSION" ]; then
    python3 -m pip install -q --no-deps "nvidia-cutlass==$CUTLASS_VERSION" >/dev/null 2>&1 || \
      python3 -m pip install -q --no-deps --break-system-packages "nvidia-cutlass==$CUTLASS_VERSION" >/dev/null 2>&1 || \
      echo "note: could not pip install nvidia-cutlass==$CUTLASS_VERSION; configure with -DBIOFM_CUDA=OFF for a CPU-only build"
  fi
fi
# Parquet input (.parquet, e.g. UniRef50): Apache Arrow / Parquet C++ from the pyarrow wheel
# (headers + shared libraries; CMake's BIOFM_PARQUET=AUTO finds them). Pinned like the above.
PYARROW_VERSION=26.0.1
if command -v python3 >/dev/null 2>&1 && [ "${BIOFM_NO_PARQUET:-0}" != 1 ]; then
  have=$(python3 -c "import importlib.metadata as m; print(m.version('pyarrow'))" 2>/dev/null || true)
  if [ -z "$have" ]; then
    python3 -m pip install -q "pyarrow==$PYARROW_VERSION" >/dev/null 2>&1 || \
      python3 -m pip install -q --break-system-packages "pyarrow==$PYARROW_VERSION" >/dev/null 2>&1 || \
      echo "note: could not pip install pyarrow==$PYARROW_VERSION; biofm builds without Parquet input"
  fi
fi
