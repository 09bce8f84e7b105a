# syntax=docker/dockerfile:1
# One image for every crm-sync process (worker, scheduler, dashboard, sim): the command decides.

# --- build: compile TypeScript to dist/ -----------------------------------------------------
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: `prepare` builds, and the sources are not here yet (npm run build below).
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
RUN npm run build

# --- runtime: production dependencies + compiled code, no sources, no dev tools --------------
FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: no `prepare` build here (no sources, no compiler); dist/ comes from the build stage.
RUN npm ci --omit=dev --no-audit --no-fund --ignore-scripts && npm cache clean --force
COPY --from=build /app/dist ./dist
# bin/crm-sync.js runs dist/ when src/ is absent, as it is here (so scripts/ is not needed): the
# bundle, dist/bundle/cli.js, or dist/cli.js when an OTEL_* variable asks for tracing.
COPY bin ./bin
# Sync definitions (mount your own over /app/jobs) and the demo's sample files.
COPY jobs ./jobs
COPY samples ./samples
USER node
EXPOSE 3000 4010
ENTRYPOINT ["node", "bin/crm-sync.js"]
CMD ["--help"]
