# Multi-stage build of the operator's release binaries into a minimal, non-root runtime image.
#   docker build -t gpu-operator:dev .
# Building the binaries never needs Docker: `cargo build --release -p gpu-operator` does the same.

FROM docker.io/library/rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --package gpu-operator \
 && install -D --mode 0755 target/release/gpu-operator /out/usr/bin/gpu-operator

# glibc (the binaries link it dynamically) and CA certificates; no shell, no package manager.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/ /
USER 65532:65532
ENTRYPOINT ["/usr/bin/gpu-operator"]
