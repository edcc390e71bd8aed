// Unit tests of what the status bar shows of the engine's state (run by tests/e2e/test_vscode.py with `node --test`).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { engineStatus } from '../src/engineState.ts';

const down = { completion: 'http://127.0.0.1:8012/infill: the server closed the connection mid-answer' };

void test('a remote engine down with the local model answering is degraded, naming the server and why', () => {
  const status = engineStatus({ state: 'degraded', problems: down });
  assert.equal(status.state, 'degraded');
  assert.match(status.detail, /local model answers/);
  assert.match(status.detail, /inline completions: http:\/\/127\.0\.0\.1:8012\/infill: the server closed/);
});

void test('nothing answering is an error; back is ready again', () => {
  assert.equal(engineStatus({ state: 'down', problems: down }).state, 'error');
  const back = engineStatus({ state: 'ready', problems: {}, engine: 'coder via llama-server at http://127.0.0.1:8012' });
  assert.deepEqual(back, { state: 'ready', detail: 'coder via llama-server at http://127.0.0.1:8012' });
});

void test('both engines are named when chat-style work has its own', () => {
  const s = engineStatus({ state: 'ready', engine: 'waferline-mini (local)', chatEngine: 'instruct via openai at http://gpu:8000' });
  assert.equal(s.detail, 'waferline-mini (local); chat-style work: instruct via openai at http://gpu:8000');
});

void test('loading and a failed load', () => {
  assert.equal(engineStatus({ state: 'loading' }).state, 'starting');
  const failed = engineStatus({ state: 'failed', problems: { completion: 'OSError: cannot connect' } });
  assert.deepEqual(failed, { state: 'error', detail: 'inline completions: OSError: cannot connect' });
});
