# The service's images, one target each. Build from the repository root:
#   docker build --target api -t mailhooks-api .
#   docker build --target dispatcher -t mailhooks-dispatcher .
FROM node:22-bookworm-slim AS build
WORKDIR /app
# The whole workspace is needed: npm ci generates the Prisma client (postinstall) and
# tsc -b builds every package the apps depend on.
COPY . .
RUN npm ci && npm run build

FROM node:22-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app /app
USER node

# The Node flags of `npm run start:api` and `npm run start:dispatcher` (package.json): a smaller
# young generation and a bounded heap keep the resident memory low (bench/README.md).
FROM runtime AS api
CMD ["node", "--max-semi-space-size=4", "--max-old-space-size=192", "apps/api/dist/main.js"]

FROM runtime AS dispatcher
CMD ["node", "--max-semi-space-size=4", "--max-old-space-size=128", "apps/dispatcher/dist/main.js"]
