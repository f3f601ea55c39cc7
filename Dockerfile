# sluice's container image: a static binary on distroless, running as a
# non-root user. Build it from the repository's root:
#
#   docker build -t sluice --build-arg VERSION=$(git describe --tags --always) \
#     --build-arg COMMIT=$(git rev-parse --short=12 HEAD) .
#   docker run --rm -p 8080:8080 -p 127.0.0.1:9090:9090 sluice
#
# The image serves deploy/sluice.yaml, copied to /etc/sluice/sluice.yaml:
# mount your own config there (or pass `serve --config FILE`). There is no
# HEALTHCHECK: probe /healthz and /readyz on the admin port (9090) from the
# orchestrator, as deploy/kubernetes/ does. docs/deployment.md has the rest.

FROM golang:1.26 AS build
WORKDIR /src
# The workspace (go.work) joins the library module (the root) and the
# gateway module (gateway/), whose sluice command this image runs; go.work
# also names bench/, so its go.mod comes in too (.dockerignore keeps the
# rest of bench/ out). Only the modules the command builds with are
# downloaded.
COPY go.work go.work.sum go.mod go.sum ./
COPY gateway/go.mod gateway/go.sum gateway/
COPY bench/go.mod bench/go.sum bench/
RUN go list -deps ./gateway/cmd/sluice >/dev/null
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
# scripts/build.sh holds the build flags (CGO_ENABLED=0, -trimpath, the
# version stamp); the release script and the tests run the same file.
RUN VERSION="$VERSION" COMMIT="$COMMIT" scripts/build.sh /out/sluice

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sluice /usr/local/bin/sluice
COPY deploy/sluice.yaml /etc/sluice/sluice.yaml
# 65532 is distroless' "nonroot" user.
USER 65532:65532
# 8080: the public listener. 9090: the admin listener (/healthz, /readyz,
# /metrics; /admin/ once SLUICE_ADMIN_TOKEN is set).
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/sluice"]
CMD ["serve", "--config", "/etc/sluice/sluice.yaml"]
