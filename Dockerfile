# syntax=docker/dockerfile:1
#
# One image for the control plane, the sidecar proxy and the injection webhook; the command picks
# (the base image's entry point is node):
#   docker run -p 8080:8080 -p 3128:3128 -e SVC_PROXY_HOST=0.0.0.0 agent-governance   standalone
#                                                 (the default command, with the proxy's V8 flags)
#   args: [dist/control-plane/main.js]            control plane
#   args: [dist/control-plane/injector/main.js]   injection webhook
#   args: [--max-semi-space-size=16, --heap-growing-percent=100, --expose-gc, --disable-sigusr1, dist/proxy/main.js]
#                                                 sidecar proxy (its V8 flags: docs/performance.md)
#
# Build: docker build --build-arg VERSION=1.0.0 --build-arg REVISION=$(git rev-parse HEAD) \
#          --build-arg CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ) -t agent-governance:1.0.0 .
#
# No HEALTHCHECK: the three commands answer health on different ports and schemes (8080 HTTP,
# 9464 HTTP, 8443 HTTPS), so one check would mark two of them unhealthy; the image has no shell or
# curl to run one; and Kubernetes ignores HEALTHCHECK (the chart declares startup, liveness and
# readiness probes for each).

ARG NODE_MAJOR=24

FROM node:${NODE_MAJOR}-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY core ./core
COPY proxy ./proxy
COPY control-plane ./control-plane
COPY standalone ./standalone
COPY config ./config
# Read at run time: the gRPC contracts, and the error pages served as /docs/errors/{code}.
COPY proto ./proto
COPY docs/errors.md ./docs/errors.md
COPY scripts/bundle-proxy.ts ./scripts/bundle-proxy.ts
# Compiled JavaScript (dist/, config files beside it; the sidecar's entry bundled into one file by
# esbuild, docs/performance.md); then the dev dependencies go.
RUN npm run build \
  && npm prune --omit=dev --no-audit --no-fund \
  && mkdir -p /out/data

# Debian 12, like the build stage, so lmdb's native binding matches the glibc it was installed for.
FROM gcr.io/distroless/nodejs${NODE_MAJOR}-debian12:nonroot
ARG VERSION=1.0.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="agent-governance" \
      org.opencontainers.image.description="Governance for AI agents: sidecar proxy, control plane and sidecar injection webhook" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.base.name="gcr.io/distroless/nodejs${NODE_MAJOR}-debian12:nonroot"
WORKDIR /app
# MALLOC_ARENA_MAX: the sidecar's (and standalone mode's) environment, proxy/node-flags.ts.
ENV NODE_ENV=production \
    MALLOC_ARENA_MAX=2 \
    SVC_VERSION=${VERSION} \
    SVC_DATA_DIR=/data \
    SVC_HTTP_HOST=0.0.0.0
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
EXPOSE 8080 50051 3128 9464 8443
CMD ["--max-semi-space-size=16", "--heap-growing-percent=100", "--expose-gc", "--disable-sigusr1", "dist/standalone/main.js"]
