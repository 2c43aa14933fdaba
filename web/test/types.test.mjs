// The hand-written types (src/index.d.ts) against the API as documented: test/types-usage.ts must
// compile, and test/types-misuse.ts must fail on each of its marked lines.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { webDir } from './native.mjs';

const tsc = (file) => spawnSync(process.execPath, [join(webDir, 'node_modules', 'typescript', 'bin', 'tsc'), '--noEmit', '--strict',
  '--target', 'es2022', '--module', 'es2022', '--moduleResolution', 'bundler', '--lib', 'es2022,dom', join(webDir, 'test', file)], { encoding: 'utf8' });

test('the documented usage type-checks', () => {
  const r = tsc('types-usage.ts');
  assert.equal(r.status, 0, r.stdout + r.stderr);
});

test('misuse does not', () => {
  const r = tsc('types-misuse.ts');
  assert.notEqual(r.status, 0);
  const lines = [...r.stdout.matchAll(/types-misuse\.ts\((\d+),/g)].map((m) => Number(m[1]));
  assert.deepEqual([...new Set(lines)], [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15], r.stdout);
});
