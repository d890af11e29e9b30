import * as assert from 'node:assert/strict';
import { test } from 'node:test';

import { codeActionParams, COMMANDS, errorMessage, KINDS, pickAction } from '../actions';

test('each command asks for its own kind', () => {
  assert.equal(COMMANDS['infill.fillHoles'].kind, 'refactor.rewrite.infill.fillHoles');
  assert.equal(COMMANDS['infill.insertDocstring'].kind, 'refactor.rewrite.infill.insertDocstring');
  assert.equal(COMMANDS['infill.rewriteSelection'].kind, 'refactor.rewrite.infill.rewriteSelection');
  assert.equal(COMMANDS['infill.fixSelection'].kind, 'refactor.rewrite.infill.fixSelection');
  assert.equal(COMMANDS['infill.rewriteSelection'].target, 'selection');
  const range = { start: { line: 1, character: 2 }, end: { line: 1, character: 2 } };
  assert.deepEqual(codeActionParams('file:///a.py', range, KINDS.fillHoles), {
    textDocument: { uri: 'file:///a.py' }, range,
    context: { diagnostics: [], only: [KINDS.fillHoles], triggerKind: 1 },
  });
});

test('the first enabled action of the exact kind is picked', () => {
  const actions = [
    { command: 'x', title: 'a bare command' },
    { title: 'Infill: rewrite selection', kind: KINDS.rewriteSelection },
    { title: 'Infill: fill holes', kind: KINDS.fillHoles, disabled: { reason: '1:5: unclosed' } },
    { title: 'Infill: fill 2 holes', kind: KINDS.fillHoles, data: { op: 'fill' } },
    { title: 'Infill: fill 3 holes', kind: KINDS.fillHoles },
  ];
  assert.deepEqual(pickAction(actions, KINDS.fillHoles), { action: actions[3] });
  assert.deepEqual(pickAction(actions.slice(0, 3), KINDS.fillHoles), { reason: '1:5: unclosed' });
  const none = pickAction(actions, KINDS.insertDocstring);
  assert.ok('reason' in none && none.reason.includes(KINDS.insertDocstring));
  assert.ok('reason' in pickAction([{ title: 't', kind: `${KINDS.fillHoles}.more` }], KINDS.fillHoles));
});

test('errors: a cancel says nothing, a stale result says why', () => {
  assert.equal(errorMessage(-32800, 'cancelled'), undefined);
  assert.match(errorMessage(-32801, 'modified') ?? '', /document changed/);
  assert.equal(errorMessage(-32803, 'worker died'), 'Infill: worker died');
});
