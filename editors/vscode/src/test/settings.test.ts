import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import {
  documentSelector, languages, Manifest, serverCommand, serverSettingNames, serverSettings,
} from '../settings';

const manifest = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as Manifest;

test('the server settings are the manifest settings but the client ones', () => {
  const names = serverSettingNames(manifest);
  for (const name of ['modelDir', 'workerAddress', 'steps', 'threshold', 'maxTokens', 'holeMarker',
    'diagnostics', 'liveView']) {
    assert.ok(names.includes(name), name);
  }
  for (const name of ['pythonPath', 'serverCommand', 'languages', 'trace.server']) {
    assert.ok(!names.includes(name), name);
  }
});

test('unset settings are left out so that the server uses its defaults', () => {
  const values: Record<string, unknown> = {
    modelDir: null, workerAddress: 'unix:/tmp/w.sock', steps: undefined, threshold: 0.8,
    holeMarker: '', liveView: false, maxTokens: 128,
  };
  assert.deepEqual(serverSettings((n) => values[n], Object.keys(values)),
    { workerAddress: 'unix:/tmp/w.sock', threshold: 0.8, liveView: false, maxTokens: 128 });
});

test('the server runs as python -m diffusion_infill.lsp.server unless a command is set', () => {
  assert.deepEqual(serverCommand(undefined, []), { command: 'python3', args: ['-m', 'diffusion_infill.lsp.server'] });
  assert.deepEqual(serverCommand(' /venv/bin/python ', undefined),
    { command: '/venv/bin/python', args: ['-m', 'diffusion_infill.lsp.server'] });
  assert.deepEqual(serverCommand('python3', ['infill-lsp', '-v']), { command: 'infill-lsp', args: ['-v'] });
  assert.deepEqual(serverCommand('', [1, 2]), { command: 'python3', args: ['-m', 'diffusion_infill.lsp.server'] });
});

test('python is always served, then the user languages', () => {
  assert.deepEqual(languages(undefined), ['python']);
  assert.deepEqual(languages(['rust', 'python', ' rust ', 3, '']), ['python', 'rust']);
  assert.deepEqual(documentSelector(['python']),
    [{ scheme: 'file', language: 'python' }, { scheme: 'untitled', language: 'python' }]);
});
