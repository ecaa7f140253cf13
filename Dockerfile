# Multi-stage build of the operator's release binaries into a minimal, non-root runtime image.
#   docker build -t gpu-operator:dev .
# The same image runs the operator and, as the validator image, `gpu-operator-validator`; NVIDIA's
# command name `nvidia-validator` (the node status exporter's, with COMPONENT=metrics) links to it.
# Building the binaries never needs Docker: `cargo build --release -p gpu-operator -p gpu-operator-validator`.

FROM docker.io/library/rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --package gpu-operator --package gpu-operator-validator \
 && install -D --mode 0755 target/release/gpu-operator /out/usr/bin/gpu-operator \
 && install -D --mode 0755 target/release/gpu-operator-validator /out/usr/bin/gpu-operator-validator \
 && ln -s gpu-operator-validator /out/usr/bin/nvidia-validator

# glibc (the binaries link it dynamically) and CA certificates; no shell, no package manager.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/ /
USER 65532:65532
ENTRYPOINT ["/usr/bin/gpu-operator"]
