import * as assert from 'node:assert/strict';
import { test } from 'node:test';

import { displayText, holeStarts, layout, LiveState, StepParams } from '../live';

test('hole markers, bracketed and plain', () => {
  const text = 'a = <mask>\nb = <mask:4> + <masked> + <<mask>>\n';
  assert.deepEqual(holeStarts(text), [4, 15, 38]);
  assert.deepEqual(holeStarts('x = ?? + ???', '??'), [4, 9]);
  assert.deepEqual(holeStarts('nothing here'), []);
});

test('dropped slots are not shown, line breaks are', () => {
  assert.equal(displayText('a + b∅∅∅'), 'a + b');
  assert.equal(displayText('░░\n░∅'), '░░⏎░');
});

test('each span at its anchor, else all at one place', () => {
  const spans = [{ index: 0, text: 'a∅' }, { index: 1, text: '░b' }];
  assert.deepEqual(layout(spans, [], [4, 20], 0), [{ offset: 4, text: 'a' }, { offset: 20, text: '░b' }]);
  assert.deepEqual(layout(spans, [undefined, 9], [4, 20], 0), [{ offset: 4, text: 'a' }, { offset: 9, text: '░b' }]);
  assert.deepEqual(layout(spans, [], [7], 0), [{ offset: 7, text: 'a │ ░b' }]);
  assert.deepEqual(layout(spans, [], undefined, 3), [{ offset: 3, text: 'a │ ░b' }]);
  assert.deepEqual(layout([], [], [1], 0), []);
});

test('steps of another version are not shown; the end clears', () => {
  const live = new LiveState();
  const p: StepParams = {
    uri: 'file:///a.py', version: 3, requestId: 5, operation: 'fill', step: 1,
    spans: [{ index: 0, text: '░' }],
  };
  live.expect(p.uri, [10]);
  assert.equal(live.step(p, 4, [], 0), undefined);
  assert.equal(live.showing(p.uri), false);
  assert.deepEqual(live.step(p, 3, [], 0), [{ offset: 10, text: '░' }]);
  // a completion beside the command is shown at the cursor, not at the command's anchors
  assert.deepEqual(live.step({ ...p, operation: 'completion' }, 3, [], 2), [{ offset: 2, text: '░' }]);
  assert.equal(live.end(p.uri), true);
  assert.equal(live.end(p.uri), false);
});
