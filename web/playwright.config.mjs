// Playwright against the demo, served twice by demo/server.mjs: cross-origin isolated (COOP/COEP,
// the threaded builds) on 8123 and not isolated on 8124. Chromium is Debian's /usr/bin/chromium
// (nothing is downloaded). Models come from ../shared/models and web/artifacts (global-setup.mjs).
import { defineConfig } from '@playwright/test';

// KRAFLA_E2E_PORT=N moves them to N and N+1 (two checkouts testing at once on one machine).
const PORT = Number(process.env.KRAFLA_E2E_PORT ?? 8123);
export const ISOLATED = `http://127.0.0.1:${PORT}`;
export const PLAIN = `http://127.0.0.1:${PORT + 1}`;

export default defineConfig({
  testDir: './e2e',
  testMatch: /.*\.spec\.mjs/,
  globalSetup: './e2e/global-setup.mjs',
  timeout: 60_000,
  workers: 1,
  retries: 0,
  reporter: [['list']],
  outputDir: './test-results',
  use: {
    browserName: 'chromium',
    headless: true,
    baseURL: ISOLATED,
    launchOptions: {
      executablePath: process.env.KRAFLA_CHROMIUM ?? '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
        '--disable-component-update', '--disable-sync'],
    },
  },
  webServer: [
    { command: `node demo/server.mjs ${PORT} coi --count --models artifacts`, url: `${ISOLATED}/demo/index.html`, reuseExistingServer: false },
    { command: `node demo/server.mjs ${PORT + 1} --count --models artifacts`, url: `${PLAIN}/demo/index.html`, reuseExistingServer: false },
  ],
});
