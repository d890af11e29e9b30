// End to end: the extension (.vsix) inside a real VS Code workbench, headless.
//
// code-server (editors/vscode/e2e/.deps, from setup.sh) serves the workbench; Debian's
// Chromium, driven by playwright-core, opens a Python file with holes from the Explorer,
// runs "Infill: Fill holes" from the Command Palette, and the file, auto-saved, is read
// back from disk. The language server is the real one (`infill.pythonPath -m diffusion_infill.lsp.server`);
// it reaches the model worker only through the `infill.workerAddress` setting, so the
// caller can point it at a deterministic fake (tests/test_editors_vscode_e2e.py).
//
// Input (environment):
//   E2E_VSIX      the extension package          E2E_PYTHON  infill.pythonPath
//   E2E_WORKER    infill.workerAddress            E2E_OUT     a directory for the results
//   E2E_TEXT      the Python file's text (JSON string)
//   E2E_PYTHONPATH  optional, the server's PYTHONPATH (a checkout that is not installed)
//   E2E_CHROMIUM  optional, default /usr/bin/chromium
// Output: E2E_OUT/report.json {text, statusBar, progressClosed, timings, error},
// E2E_OUT/before.png and screenshot.png (after the fill), error.png when it failed.
// Exit status 0 when the run got as far as reading the file back (the caller judges it).
//
// Every wait is on a condition (a selector, a port, the file) with a deadline; no sleeps.

import { spawn, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const deps = path.join(here, '.deps');
const require = createRequire(path.join(deps, 'package.json'));
const { chromium } = require('playwright-core');
const codeServer = path.join(deps, 'node_modules', '.bin', 'code-server');

const env = (name, fallback) => {
  const v = process.env[name] ?? fallback;
  if (v === undefined) throw new Error(`${name} is not set`);
  return v;
};
const out = env('E2E_OUT');
const vsix = env('E2E_VSIX');
const text = JSON.parse(env('E2E_TEXT'));
const FILE = 'holes.py';

const started = Date.now();
const timings = {};
const mark = (name) => { timings[name] = (Date.now() - started) / 1000; };
const report = { text: null, statusBar: null, progressClosed: null, timings, error: null };

fs.mkdirSync(out, { recursive: true });
const tmp = fs.mkdtempSync(path.join(out, 'run-'));
const dir = (name) => { const d = path.join(tmp, name); fs.mkdirSync(d, { recursive: true }); return d; };
const userData = dir('user-data');
const extensions = dir('extensions');
const workspace = dir('workspace');
const profile = dir('chromium');
// code-server and everything it starts keep their files under tmp, not in ~
const childEnv = {
  ...process.env,
  XDG_CONFIG_HOME: dir('xdg-config'), XDG_DATA_HOME: dir('xdg-data'), XDG_CACHE_HOME: dir('xdg-cache'),
  TMPDIR: dir('tmp'),
};
if (process.env.E2E_PYTHONPATH) {
  childEnv.PYTHONPATH = [process.env.E2E_PYTHONPATH, process.env.PYTHONPATH].filter(Boolean).join(path.delimiter);
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

async function until(what, timeoutMs, probe) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = await probe();
    if (got) return got;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000}s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100)); // a polling interval, not a wait for the event
  }
}

let server;
let browser;
let page;
let serverLog = '';

async function main() {
  fs.writeFileSync(path.join(workspace, FILE), text);
  fs.mkdirSync(path.join(userData, 'User'), { recursive: true });
  fs.writeFileSync(path.join(userData, 'User', 'settings.json'), JSON.stringify({
    'infill.pythonPath': env('E2E_PYTHON'),
    'infill.workerAddress': env('E2E_WORKER'),
    'infill.progressDelay': 0,
    'workbench.startupEditor': 'none',
    'workbench.tips.enabled': false,
    'workbench.enableExperiments': false,
    'telemetry.telemetryLevel': 'off',
    'extensions.autoUpdate': false,
    'extensions.autoCheckUpdates': false,
    'update.mode': 'none',
    'security.workspace.trust.enabled': false,
    'files.autoSave': 'afterDelay',
    'files.autoSaveDelay': 200,
    'window.commandCenter': false,
  }, null, 2));

  const install = spawnSync(codeServer, ['--user-data-dir', userData, '--extensions-dir', extensions,
    '--install-extension', vsix], { env: childEnv, encoding: 'utf8', timeout: 120_000 });
  if (install.status !== 0) throw new Error(`installing ${vsix} failed: ${install.stdout}${install.stderr}`);
  mark('installed');

  const port = await freePort();
  // detached: its own session and process group (setsid), so that its file watchers and
  // the extension host go with it when the group is killed
  server = spawn(codeServer, ['--bind-addr', `127.0.0.1:${port}`, '--auth', 'none', '--disable-telemetry',
    '--disable-update-check', '--disable-workspace-trust', '--user-data-dir', userData,
    '--extensions-dir', extensions, workspace], { env: childEnv, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  server.stdout.on('data', (d) => { serverLog += d; });
  server.stderr.on('data', (d) => { serverLog += d; });
  const url = `http://127.0.0.1:${port}/`;
  await until('code-server to answer', 60_000, async () => {
    if (server.exitCode !== null) throw new Error(`code-server exited: ${serverLog}`);
    try { return (await fetch(`${url}healthz`)).ok; } catch { return false; }
  });
  mark('serverUp');

  const context = await chromium.launchPersistentContext(profile, {
    executablePath: env('E2E_CHROMIUM', '/usr/bin/chromium'),
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
    viewport: { width: 1280, height: 720 },
  });
  browser = context;
  page = context.pages()[0] ?? await context.newPage();
  page.setDefaultTimeout(90_000);
  await page.goto(`${url}?folder=${encodeURIComponent(workspace)}`);
  const row = page.locator('.explorer-folders-view .monaco-list-row', { hasText: FILE });
  await row.waitFor();
  mark('workbench');
  await row.click();
  const editor = page.locator('.editor-instance .monaco-editor').first();
  await editor.locator('.view-lines', { hasText: '<mask>' }).waitFor();
  mark('fileOpen');

  // the server is up and its worker answered infill.workerInfo: "$(sparkle) infill: MODEL"
  const status = page.locator('.statusbar-item', { hasText: /infill: \S/ });
  await status.waitFor();
  report.statusBar = (await status.first().innerText()).trim();
  mark('serverReady');
  await page.screenshot({ path: path.join(out, 'before.png') });

  await editor.click();
  await page.keyboard.press('F1');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor();
  await input.fill('>Infill: Fill holes');
  await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Fill holes' }).first().waitFor();
  await page.keyboard.press('Enter');
  mark('commandRun');

  const file = path.join(workspace, FILE);
  report.text = await until('the filled file to be saved', 90_000,
    () => { const t = fs.readFileSync(file, 'utf8'); return t !== text && !t.includes('<mask>') ? t : null; });
  mark('filled');
  await editor.locator('.view-lines', { hasText: report.text.split('\n')[1].trim().slice(0, 12) }).waitFor();
  // the progress notification ("Infill: ... step N", with Cancel) closes when the request ends
  const toast = page.locator('.notifications-toasts .notification-toast', { hasText: 'Infill' });
  report.progressClosed = await toast.first().waitFor({ state: 'detached', timeout: 15_000 })
    .then(() => true, () => false);
  mark('progressClosed');
  await page.screenshot({ path: path.join(out, 'screenshot.png') });
  mark('screenshot');
}

async function cleanup() {
  try { await browser?.close(); } catch { /* already gone */ }
  if (server?.pid) {
    try { process.kill(-server.pid, 'SIGTERM'); } catch { /* already gone */ }
    const exited = server.exitCode !== null || await Promise.race([
      new Promise((r) => server.once('exit', () => r(true))),
      new Promise((r) => setTimeout(() => r(false), 10_000)),
    ]);
    if (!exited) { try { process.kill(-server.pid, 'SIGKILL'); } catch { /* already gone */ } }
    // what the group left behind (file watchers) goes too
    try { process.kill(-server.pid, 'SIGKILL'); } catch { /* the group is empty */ }
  }
}

let code = 0;
try {
  await main();
} catch (err) {
  report.error = String(err?.stack ?? err);
  report.serverLog = serverLog.slice(-4000);
  try { await page?.screenshot({ path: path.join(out, 'error.png') }); } catch { /* no page */ }
  try {
    report.statusBar = (await page?.locator('.statusbar-item', { hasText: 'infill' }).first()
      .getAttribute('aria-label', { timeout: 2000 })) ?? null;
  } catch { /* no status bar item */ }
  code = 1;
} finally {
  await cleanup();
  mark('total');
  fs.writeFileSync(path.join(out, 'report.json'), JSON.stringify(report, null, 2));
  fs.rmSync(tmp, { recursive: true, force: true });
}
process.exit(code);
