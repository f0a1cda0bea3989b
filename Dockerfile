# syntax=docker/dockerfile:1
# One image for every process role (docker-compose.yml): compiled JavaScript on Node 24 (LTS), run as the
# unprivileged `node` user. The base is pinned by digest: node:24.18.0-bookworm-slim, the digest as public
# Dockerfiles record it (check it with `docker buildx imagetools inspect node:24.18.0-bookworm-slim`).
ARG NODE_IMAGE=node:24.18.0-bookworm-slim@sha256:6f7b03f7c2c8e2e784dcf9295400527b9b1270fd37b7e9a7285cf83b6951452d

# Build: every dependency, then `npm run build` compiles the TypeScript into dist/.
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build

# Run: the runtime dependencies and dist/ only; nothing here is writable by the process.
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production PORT=3000
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
USER node
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=5 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "dist/main.js"]
