# biofm in a container: build stage on CUDA + cuDNN devel (the README's build command), then a
# slim runtime stage with the installed package and a non-root user.
#
#   docker build -t biofm .                       # --build-arg BIOFM_CUDA_ARCH=90a (H100/H200)
#   docker run --rm --gpus all biofm info
#   docker run --rm --gpus all -v "$PWD/runs:/home/biofm/runs" biofm train --config-name esm2_sanity device=cuda
ARG CUDA_VERSION=13.0.2
ARG UBUNTU=ubuntu24.04

FROM nvidia/cuda:${CUDA_VERSION}-cudnn-devel-${UBUNTU} AS build
ARG BIOFM_CUDA_ARCH=90a
ENV DEBIAN_FRONTEND=noninteractive \
    BIOFM_NO_BROWSER=1
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pip \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Dependencies first, so source edits do not redo them.
COPY tools/install_deps.sh tools/install_deps.sh
RUN tools/install_deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B build -G Ninja -DBIOFM_CUDA_ARCH=${BIOFM_CUDA_ARCH} \
    && cmake --build build \
    && cmake --install build --prefix /opt/biofm

FROM nvidia/cuda:${CUDA_VERSION}-cudnn-runtime-${UBUNTU}
ENV DEBIAN_FRONTEND=noninteractive
# OpenMP and zlib are linked dynamically; OpenBLAS, yaml-cpp and zstd statically where the
# distribution ships archives (their shared libraries are listed in case it does not).
RUN apt-get update && apt-get install -y --no-install-recommends libgomp1 zlib1g libopenblas0-pthread libyaml-cpp0.8 libzstd1 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/biofm /opt/biofm
ENV PATH=/opt/biofm/bin:${PATH}
RUN useradd --create-home --shell /bin/bash biofm \
    && biofm --version
USER biofm
# The shipped configs' data/... samples are found in /opt/biofm/share/biofm (README.md, Install).
WORKDIR /home/biofm
ENTRYPOINT ["biofm"]
CMD ["--help"]
