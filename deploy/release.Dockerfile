# syntax=docker/dockerfile:1
# The release image (goreleaser's dockers_v2): the binary goreleaser built
# for the platform, on the same distroless base as the Dockerfile, running
# as a non-root user with its data directory a volume. Pin the base by
# digest when releasing: FROM gcr.io/distroless/static-debian12:nonroot@sha256:…
FROM gcr.io/distroless/static-debian12:nonroot
ARG TARGETPLATFORM
COPY ${TARGETPLATFORM}/studio /usr/local/bin/studio
ENV STUDIO_DATA_DIR=/var/lib/studio \
    STUDIO_ADDR=0.0.0.0:8765
USER 65532:65532
VOLUME ["/var/lib/studio"]
EXPOSE 8765
# Liveness; load balancers probe /readyz (studio healthz --ready).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/studio", "healthz"]
ENTRYPOINT ["/usr/local/bin/studio"]
CMD ["serve", "--log-format", "json"]
