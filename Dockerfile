# One image with paywarden's three entrypoints: /paywarden-manager,
# /paywarden-receiver and /paysim. Static binaries on distroless, non-root.
#   docker build --build-arg VERSION=v0.1.0 -t paywarden:dev .   (or: make docker-build IMG=paywarden:dev)
# `make image` builds the same binaries with the same flags and needs no
# Docker engine (internal/image; a test holds this file to it).
FROM golang:1.26 AS build
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY internal/ internal/
COPY webhookreceiver/ webhookreceiver/
ENV CGO_ENABLED=0
RUN go build -trimpath -buildvcs=false -ldflags="-s -w -buildid= -X main.version=${VERSION}" -o /out/paywarden-manager ./cmd/manager && \
    go build -trimpath -buildvcs=false -ldflags="-s -w -buildid= -X main.version=${VERSION}" -o /out/paywarden-receiver ./cmd/receiver && \
    go build -trimpath -buildvcs=false -ldflags="-s -w -buildid= -X main.version=${VERSION}" -o /out/paysim ./cmd/paysim

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /
USER 65532:65532
ENTRYPOINT ["/paywarden-manager"]
