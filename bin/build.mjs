// Compiles the service and the CLI into dist/ (dist/main.js, dist/cli/engage.js) with esbuild: the
// TypeScript sources bundled into a few ES modules, dependencies left in node_modules, source maps beside
// them. `npm run build` runs it; the launchers (bin/start.mjs, bin/engage.mjs) run it when dist/ is
// missing or older than a source it was built from.
import { mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const root = fileURLToPath(new URL('..', import.meta.url));
const dist = join(root, 'dist');
const manifestFile = join(dist, 'build.json');
const ENTRIES = { main: 'main.ts', 'cli/engage': 'cli/engage.ts' };
// Besides the sources the bundles were made of: what decides how they are made, and the versions of the
// dependencies bundled with them (`BUNDLED`).
const SETTINGS = ['bin/build.mjs', 'tsconfig.json', 'package-lock.json'];

/** True when dist/ is missing, or a file it was built from changed (or went) since. */
export function isStale() {
  let manifest;
  let builtAt;
  try {
    manifest = JSON.parse(readFileSync(manifestFile, 'utf8'));
    builtAt = statSync(manifestFile).mtimeMs;
  } catch {
    return true;
  }
  for (const input of manifest.inputs) {
    try {
      if (statSync(join(root, input)).mtimeMs > builtAt) return true;
    } catch {
      return true;
    }
  }
  return false;
}

/**
 * Dependencies stay in node_modules, but those bundled here: pure ES modules of many small files, which Node's
 * module loader finds, reads and compiles one by one at every start (a CLI command loaded 1,149 files of
 * node_modules, 288 of them Kysely's, 99 Zod's, 63 jose's: 1.65 s for `engage projections status`, most of it
 * the loader). Packages something else patches or shares (pg, express and ioredis, which OpenTelemetry
 * instruments; the OpenTelemetry API's single registry) stay outside, as do CommonJS packages and those
 * with native parts.
 */
const BUNDLED = new Set(['kysely', 'zod', 'jose']);

const dependenciesOutside = {
  name: 'dependencies-outside',
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, (args) => {
      const name = args.path.startsWith('@') ? args.path.split('/').slice(0, 2).join('/') : args.path.split('/')[0];
      return BUNDLED.has(name) ? undefined : { path: args.path, external: true };
    });
  },
};

export async function build() {
  const { build: esbuild } = await import('esbuild');
  const startedAt = new Date();
  const result = await esbuild({
    absWorkingDir: root,
    entryPoints: ENTRIES,
    outdir: 'dist',
    bundle: true,
    splitting: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    plugins: [dependenciesOutside],
    sourcemap: 'linked',
    chunkNames: 'chunks/[name]-[hash]',
    metafile: true,
    write: false,
    logLevel: 'warning',
  });
  // Each file is written whole under another name and renamed into place, chunks (named by their content)
  // before the entry points that import them: a process starting meanwhile loads the old build or the new
  // one, never half of one; two launchers building at once write the same files.
  const entryFiles = new Set(Object.keys(ENTRIES).flatMap((name) => [join(dist, `${name}.js`), join(dist, `${name}.js.map`)]));
  const files = [...result.outputFiles].sort((a, b) => Number(entryFiles.has(a.path)) - Number(entryFiles.has(b.path)));
  for (const file of files) writeWhole(file.path, file.contents);
  const inputs = [...Object.keys(result.metafile.inputs).filter((input) => !input.includes('node_modules/')), ...SETTINGS];
  writeWhole(manifestFile, JSON.stringify({ inputs }, null, 1));
  // Stamped with the time the sources were read: a source saved during the build makes the next start build again.
  utimesSync(manifestFile, startedAt, startedAt);
  const kept = new Set([...files.map((file) => file.path), manifestFile]);
  for (const file of walk(dist)) if (!kept.has(file)) rmSync(file, { force: true });
  return files.map((file) => relative(root, file.path));
}

/** Builds when stale; says so on stderr (stdout may carry a command's machine output). */
export async function ensureBuilt() {
  if (!isStale()) return;
  const started = Date.now();
  await build();
  process.stderr.write(`engage: compiled the TypeScript sources into dist/ (${Date.now() - started} ms)\n`);
}

function writeWhole(path, contents) {
  mkdirSync(dirname(path), { recursive: true });
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, contents);
  renameSync(temporary, path);
}

function* walk(folder) {
  for (const entry of readdirSync(folder, { withFileTypes: true })) {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) yield* walk(path);
    else yield path;
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const started = Date.now();
  const written = await build();
  console.log(`dist/: ${written.filter((file) => file.endsWith('.js')).length} modules in ${Date.now() - started} ms`);
}
