# syntax=docker/dockerfile:1
# lockstep gateway image: a static binary (CGO_ENABLED=0) on a distroless base, run as a
# non-root user. Build: docker build -t lockstep .   Run: see compose.yaml and docs/operations.md.

FROM golang:1.26-bookworm AS build
WORKDIR /src
# dependencies first, so code changes reuse the module cache layer
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -buildvcs=false -ldflags="-s -w" \
      -o /out/gateway ./cmd/gateway

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gateway /usr/local/bin/gateway
# distroless' nonroot user (uid/gid 65532)
USER 65532:65532
EXPOSE 4000
ENV GATEWAY_ADDR=0.0.0.0:4000
ENTRYPOINT ["/usr/local/bin/gateway"]
CMD ["serve"]
