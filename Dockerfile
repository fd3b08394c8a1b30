# syntax=docker/dockerfile:1
#
# elicitd container image.
#
#   docker build -t elicitd:0.2.0 .
#   docker run --rm -p 8080:8080 -e ELICITD_REDIS_URL=redis://host:6379 elicitd:0.2.0
#
# Two stages: a Rust toolchain builds the release binary (the Lua scripts are compiled into it
# with include_str!), and a distroless runtime holds nothing but that binary. The runtime has no
# shell: the Helm chart uses the kubelet's native `preStop.sleep` instead of `sleep`, and there is
# no HEALTHCHECK (Kubernetes probes GET /healthz and /readyz).

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
COPY . .
# The cache mounts keep the crates.io download and the target directory between builds (BuildKit);
# the binary is copied out of the cached target dir because cache mounts are not part of the layer.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin elicitd \
 && install -D -m 0755 target/release/elicitd /out/elicitd

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/elicitd /elicitd
# 65532 is the distroless "nonroot" user; numeric so `runAsNonRoot` can verify it.
USER 65532:65532
EXPOSE 8080
# The server's own default is 127.0.0.1:8080, which is unreachable from outside a container.
ENV ELICITD_LISTEN=0.0.0.0:8080
ENTRYPOINT ["/elicitd"]
