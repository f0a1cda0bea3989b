// npm on this machine writes package-lock.json with only this platform's optional native packages
// (npm/cli#4828), and `npm ci` (npm 11) then refuses the lock file. This adds the missing entries from
// the registry's metadata; where the registry serves no such package (the registry reachable here holds
// only this platform's builds), it drops the name from the parent's optional list, since nothing could
// install it anyway. Run it after every `npm install`: node .ci/complete-lockfile.mjs
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';

const lock = JSON.parse(readFileSync('package-lock.json', 'utf8'));
const packages = lock.packages;
let added = 0;
let dropped = 0;
for (const [path, entry] of Object.entries(packages)) {
  for (const [name, range] of Object.entries(entry.optionalDependencies ?? {})) {
    const nested = `${path ? `${path}/` : ''}node_modules/${name}`;
    if (packages[nested] || packages[`node_modules/${name}`]) continue;
    let meta;
    try {
      meta = JSON.parse(execFileSync('npm', ['view', `${name}@${range}`, '--json'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }));
    } catch {
      delete entry.optionalDependencies[name];
      dropped++;
      continue;
    }
    const latest = Array.isArray(meta) ? meta[meta.length - 1] : meta;
    packages[`node_modules/${name}`] = {
      version: latest.version,
      integrity: latest.dist.integrity,
      ...(latest.cpu ? { cpu: latest.cpu } : {}),
      ...(entry.dev ? { dev: true } : {}),
      ...(latest.engines ? { engines: latest.engines } : {}),
      ...(latest.libc ? { libc: latest.libc } : {}),
      ...(latest.license ? { license: latest.license } : {}),
      optional: true,
      ...(latest.os ? { os: latest.os } : {}),
    };
    added++;
  }
}
lock.packages = Object.fromEntries(Object.entries(packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a.localeCompare(b))));
writeFileSync('package-lock.json', `${JSON.stringify(lock, null, 2)}\n`);
console.log(`complete-lockfile: added ${added}, dropped ${dropped} unavailable optional platform packages`);
