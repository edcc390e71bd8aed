// Unit tests of when the extension tells the server where the user is (`waferline/didFocus`; run by
// tests/e2e/test_vscode.py with `node --test`).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CLICK_DELAY_MS, type FocusParams, FocusReporter } from '../src/focus.ts';

/** Timers that run only when told to, so that a test decides what "later" is. */
function fakeTimers(): { timers: { set: (fn: () => void, ms: number) => number; clear: (h: unknown) => void }; run: () => number[] } {
  let next = 0;
  const due = new Map<number, { fn: () => void; ms: number }>();
  return {
    timers: {
      set: (fn, ms) => {
        due.set(++next, { fn, ms });
        return next;
      },
      clear: (h) => {
        due.delete(h as number);
      },
    },
    run: () => {
      const delays = [...due.values()].map((t) => t.ms);
      const fns = [...due.values()].map((t) => t.fn);
      due.clear();
      for (const fn of fns) {
        fn();
      }
      return delays;
    },
  };
}

const at = (uri: string, line: number, character: number): FocusParams => ({
  textDocument: { uri },
  position: { line, character },
});

void test('an editor change is sent at once, with its uri and cursor', () => {
  const sent: FocusParams[] = [];
  const reporter = new FocusReporter((p) => sent.push(p), fakeTimers().timers);
  reporter.editorChanged('file:///a.py', 3, 7);
  assert.deepEqual(sent, [at('file:///a.py', 3, 7)]);
});

void test('the same place twice in a row is sent once; another place or document is sent', () => {
  const sent: FocusParams[] = [];
  const reporter = new FocusReporter((p) => sent.push(p), fakeTimers().timers);
  reporter.editorChanged('file:///a.py', 0, 0);
  reporter.editorChanged('file:///a.py', 0, 0);
  reporter.editorChanged('file:///b.py', 0, 0);
  reporter.editorChanged('file:///a.py', 0, 0);
  assert.deepEqual(sent, [at('file:///a.py', 0, 0), at('file:///b.py', 0, 0), at('file:///a.py', 0, 0)]);
});

void test('clicks are sent once the cursor stays put, only the last of a quick series', () => {
  const sent: FocusParams[] = [];
  const clock = fakeTimers();
  const reporter = new FocusReporter((p) => sent.push(p), clock.timers);
  reporter.cursorPlaced('file:///a.py', 10, 4);
  reporter.cursorPlaced('file:///a.py', 12, 0);
  assert.deepEqual(sent, [], 'nothing before the pause');
  assert.deepEqual(clock.run(), [CLICK_DELAY_MS], 'one timer left: the last click');
  assert.deepEqual(sent, [at('file:///a.py', 12, 0)]);
});

void test('an editor change drops a click still waiting, and dispose drops it too', () => {
  const sent: FocusParams[] = [];
  const clock = fakeTimers();
  const reporter = new FocusReporter((p) => sent.push(p), clock.timers);
  reporter.cursorPlaced('file:///a.py', 10, 4);
  reporter.editorChanged('file:///b.py', 1, 1);
  reporter.cursorPlaced('file:///b.py', 5, 5);
  reporter.dispose();
  assert.deepEqual(clock.run(), []);
  assert.deepEqual(sent, [at('file:///b.py', 1, 1)]);
});
