# One image, three entry points: standalone (default), control plane, proxy.
#   docker build -t agent-governance .
#   docker run -p 8080:8080 -p 3128:3128 -p 9464:9464 -e SVC_PROXY_HOST=0.0.0.0 agent-governance
# The proxy's traffic port stays on loopback unless told otherwise: a sidecar's agent shares the
# pod's loopback, and a wider address would make it an open proxy (SVC_PROXY_HOST above is for
# a local trial only). The REST and admin ports listen on every address of the container.
#   docker run agent-governance node control-plane/main.ts
#   docker run agent-governance node proxy/main.ts
FROM node:24-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund

FROM node:24-slim
WORKDIR /app
ENV NODE_ENV=production SVC_DATA_DIR=/data SVC_HTTP_HOST=0.0.0.0 SVC_PROXY_ADMIN_HOST=0.0.0.0
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY core ./core
COPY control-plane ./control-plane
COPY proxy ./proxy
COPY standalone ./standalone
COPY config ./config
# Served as /docs/errors/{code} by both processes (the documentation_url of error bodies).
COPY docs/errors.md ./docs/errors.md
COPY proto ./proto
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 8080 3128 9464
CMD ["node", "standalone/main.ts"]
