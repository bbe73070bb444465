# syntax=docker/dockerfile:1
# lockstep gateway image: a static binary (CGO_ENABLED=0) on a distroless base, run as a
# non-root user. Run: see compose.yaml and docs/operations.md. Build, stamping the version
# (.git is not in the build context, so the binary cannot read it; `gateway version` prints these):
#   docker build -t lockstep --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg COMMIT=$(git rev-parse HEAD) --build-arg BUILD_TIME=$(date -u +%Y-%m-%dT%H:%M:%SZ) .

FROM golang:1.26-bookworm AS build
WORKDIR /src
# dependencies first, so code changes reuse the module cache layer
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
ARG COMMIT=""
ARG BUILD_TIME=""
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -buildvcs=false \
      -ldflags="-s -w -X main.version=${VERSION} -X main.commit=${COMMIT} -X main.buildTime=${BUILD_TIME}" \
      -o /out/gateway ./cmd/gateway

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gateway /usr/local/bin/gateway
# distroless' nonroot user (uid/gid 65532)
USER 65532:65532
EXPOSE 4000
ENV GATEWAY_ADDR=0.0.0.0:4000
# distroless has no shell or curl: the binary checks its own readiness (GET /health/readiness
# on GATEWAY_ADDR's port; exit 0 when 200)
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
  CMD ["/usr/local/bin/gateway", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/gateway"]
CMD ["serve"]
