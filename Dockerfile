# syntax=docker/dockerfile:1
# Studio operator daemon: a static binary (no cgo: SQLite is pure Go) on a
# distroless base with CA certificates, running as a non-root user, its data
# directory a volume. Build:
#   docker build --build-arg VERSION=v1.2.3 --build-arg REVISION=$(git rev-parse HEAD) -t studio .
# (.git stays out of the context, so go build cannot record the revision itself.)

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
ARG REVISION=""
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" -o /out/studio ./cmd/studio \
 && mkdir -p -m 0700 /out/data

FROM gcr.io/distroless/static-debian12:nonroot
LABEL org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/studio /usr/local/bin/studio
COPY --from=build --chown=65532:65532 /out/data /var/lib/studio
ENV STUDIO_DATA_DIR=/var/lib/studio \
    STUDIO_ADDR=0.0.0.0:8765
USER 65532:65532
VOLUME ["/var/lib/studio"]
EXPOSE 8765
# Liveness (/healthz), not readiness: an orchestrator that restarts
# unhealthy containers must not restart a daemon that is only draining or
# waiting for its database. Load balancers probe /readyz (studio healthz
# --ready; deploy/compose.yaml, deploy/Caddyfile).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/studio", "healthz"]
ENTRYPOINT ["/usr/local/bin/studio"]
CMD ["serve", "--log-format", "json"]
