// Unit tests of what an accept of (part of) a suggestion is counted as keeping (run by tests/e2e/test_vscode.py
// with `node --test`).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { keptText } from '../src/partialAccept.ts';

void test('a word accepted at the cursor keeps what it inserted', () => {
  assert.equal(keptText([{ rangeOffset: 10, rangeLength: 0, text: ' a' }]), ' a');
});

void test('a full accept rewrites the typed start of the suggestion: only the rest is kept', () => {
  assert.equal(keptText([{ rangeOffset: 10, rangeLength: 3, text: 'ret a + b' }]), ' a + b');
});

void test('deletions and several changes at once are not accepts', () => {
  assert.equal(keptText([{ rangeOffset: 0, rangeLength: 4, text: '' }]), undefined);
  assert.equal(keptText([{ rangeOffset: 0, rangeLength: 0, text: 'a' }, { rangeOffset: 5, rangeLength: 0, text: 'b' }]), undefined);
  assert.equal(keptText([]), undefined);
});
