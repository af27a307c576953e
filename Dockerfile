# The polyop host image: the host at /host and the sidecar probe at /probe
# (cmd/probe, which the deployment's init container copies into the sidecar's
# container), both static, on an empty base image, run as a non-root user.
#
# Build it from the repository root (make docker-build does):
#
#	docker build -t polyop-host:dev .
#
# The builder image is pinned to a Go release; pass
# --build-arg GO_IMAGE=golang:<version>@sha256:<digest> to pin its digest too.
ARG GO_IMAGE=golang:1.26.8

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS builder
ARG TARGETOS
ARG TARGETARCH
WORKDIR /workspace
# The modules first: a source change then reuses the download layer. The
# host's module requires the Go SDK's (sdk/go) through a replace, so the SDK's
# go.mod is needed to download.
COPY go.mod go.sum ./
COPY sdk/go/go.mod sdk/go/go.sum sdk/go/
RUN go mod download
# Only the packages the binaries are built from (test/deploy checks this list
# against `go list -deps`).
COPY cmd/ cmd/
COPY internal/ internal/
COPY sdk/go/ sdk/go/
# Static binaries for the target platform (cross-compiled under buildx).
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
	go build -trimpath -ldflags "-s -w" \
	-o /out/host ./cmd/host && \
	CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
	go build -trimpath -ldflags "-s -w" -o /out/probe ./cmd/probe

FROM scratch
# CA certificates, for an API server or a sidecar reached over TLS with a
# publicly issued certificate.
COPY --from=builder /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=builder /out/host /host
COPY --from=builder /out/probe /probe
# A numeric user, so that the kubelet can verify runAsNonRoot.
USER 65532:65532
ENTRYPOINT ["/host"]
