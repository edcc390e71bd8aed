// Unit tests of adding the user's instruction to the rewrite command (run by tests/e2e/test_vscode.py with
// `node --test`).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { withInstruction } from '../src/rewrite.ts';

const argument = { uri: 'file:///a.py', version: 3, start: 0, end: 12 };
const answer = (text: string | undefined) => () => Promise.resolve(text);
const mustNotAsk = () => Promise.reject(new Error('must not ask'));

void test('the instruction the user types is added to the argument, trimmed', async () => {
  const args = await withInstruction([argument], answer('  use a list comprehension '));
  assert.deepEqual(args, [{ ...argument, instruction: 'use a list comprehension' }]);
});

void test('a cancelled or empty input sends nothing', async () => {
  assert.equal(await withInstruction([argument], answer(undefined)), undefined);
  assert.equal(await withInstruction([argument], answer('   ')), undefined);
});

void test('an instruction already in the argument is kept and nothing is asked', async () => {
  const given = [{ ...argument, instruction: 'shorter' }];
  assert.deepEqual(await withInstruction(given, mustNotAsk), given);
});

void test('arguments of another shape go to the server as they are', async () => {
  for (const args of [[], ['text'], [null], [[1, 2]]]) {
    assert.deepEqual(await withInstruction(args, mustNotAsk), args);
  }
});
