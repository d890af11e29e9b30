import * as assert from 'node:assert/strict';
import { test } from 'node:test';

import { Busy, formatInfo, statusText } from '../status';

const info = { model: 'infill-small', device: 'cuda:0' };

test('idle: the model and the device', () => {
  assert.equal(statusText({ state: 'running', info }).text, '$(sparkle) infill: infill-small · cuda:0');
  const cpu = { model: 'shipped', device: 'cpu', precision: 'int8' }; // what the model computes in
  assert.equal(statusText({ state: 'running', info: cpu }).text, '$(sparkle) infill: shipped · cpu int8');
  assert.equal(statusText({ state: 'running', info: cpu }).tooltip, 'Infill: model shipped on cpu int8');
  assert.equal(statusText({ state: 'running' }).text, '$(loading~spin) infill');
  assert.equal(statusText({ state: 'stopped', info }).text, '$(circle-slash) infill');
  const down = statusText({ state: 'running', infoError: 'connection refused' });
  assert.equal(down.text, '$(warning) infill');
  assert.match(down.tooltip, /connection refused/);
});

test('busy: the progress reported last, and how many more run', () => {
  const busy = new Busy();
  busy.begin('a', 'Fill holes');
  assert.equal(statusText({ state: 'running', info, busy }).text, '$(loading~spin) infill: Fill holes');
  busy.report('a', 'step 3');
  busy.begin(7, 'Insert docstring');
  busy.report('a', 'step 4');
  assert.equal(statusText({ state: 'running', info, busy }).text,
    '$(loading~spin) infill: Fill holes: step 4 (+1)');
  busy.end('a');
  assert.equal(busy.current, 'Insert docstring');
  busy.end(7);
  busy.report(7, 'late');
  assert.equal(busy.count, 0);
  assert.equal(statusText({ state: 'running', info, busy }).text, '$(sparkle) infill: infill-small · cuda:0');
});

test('worker info lines', () => {
  assert.deepEqual(formatInfo({
    model: 'm', device: 'cpu', versions: { torch: '2.4', infill: '0.1' }, batching: true,
    counters: { requests: 3 },
  }), ['model m on cpu', 'versions: infill=0.1, torch=2.4', 'batching: true', 'counters: requests=3']);
  assert.deepEqual(formatInfo({ model: 'm', device: 'cpu', precision: 'int8' }), ['model m on cpu (int8)']);
});
