# Multi-stage build of the operator's release binaries into a minimal, non-root runtime image.
#   docker build -t gpu-operator:dev .
# The same image runs the operator and serves as the validator image. It answers the same contract
# as NVIDIA's validator image (`nvcr.io/nvidia/gpu-operator`), so a ClusterPolicy may name either:
# `/usr/bin/nvidia-validator` (our validator, driven by COMPONENT/WITH_WAIT/… as NVIDIA's) and a
# static busybox `sh` (in /usr/bin, on the image's PATH) with the applets the rendered `sh -c` scripts use (the barrier loops,
# the validator pod's idle loop and preStop hook). The contract, with NVIDIA's image beside ours,
# is crates/gpu-operator/tests/validator_images.yaml; a test checks this file against it.
# `/usr/bin/vectorAdd` is the CUDA workload of the validator's workload pods (the command NVIDIA's
# image answers to): it loads the driver's libcuda.so.1, which the NVIDIA runtime mounts, at run time.
# Building the binaries never needs Docker: `cargo build --release -p gpu-operator
# -p gpu-operator-validator -p gpu-operator-cuda-workload`.

FROM docker.io/library/rust:1.95-bookworm AS build
RUN apt-get update \
 && apt-get install --yes --no-install-recommends busybox-static \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked --package gpu-operator --package gpu-operator-validator \
      --package gpu-operator-cuda-workload \
 && install -D --mode 0755 target/release/gpu-operator /out/usr/bin/gpu-operator \
 && install -D --mode 0755 target/release/gpu-operator-validator /out/usr/bin/gpu-operator-validator \
 && install -D --mode 0755 target/release/gpu-operator-cuda-workload /out/usr/bin/gpu-operator-cuda-workload \
 && ln -s gpu-operator-validator /out/usr/bin/nvidia-validator \
 && ln -s gpu-operator-cuda-workload /out/usr/bin/vectorAdd \
 && install -D --mode 0755 /bin/busybox /out/usr/bin/busybox \
 && for applet in sh sleep rm; do ln -s busybox "/out/usr/bin/$applet"; done

# glibc (the binaries link it dynamically) and CA certificates; no package manager.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/ /
USER 65532:65532
ENTRYPOINT ["/usr/bin/gpu-operator"]
