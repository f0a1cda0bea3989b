FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY . .
# Compiled once into the image (esbuild is a runtime dependency): processes start from dist/.
RUN node bin/build.mjs
ENV NODE_ENV=production PORT=3000
EXPOSE 3000
USER node
CMD ["node", "--enable-source-maps", "dist/main.js"]
