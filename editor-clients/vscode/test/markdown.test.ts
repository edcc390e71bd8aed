// The Markdown the previews show (run by tests/e2e/test_vscode.py with `node --test`).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { deltaOf, markdownOf, STREAMING, statsMarkdown, streamingMarkdown, withoutFileLinks } from '../src/markdown.ts';

void test('an answer is taken from its markdown field, or shown as JSON', () => {
  assert.equal(markdownOf({ markdown: '# A', answer: 'B' }), '# A');
  assert.equal(markdownOf('plain'), 'plain');
  assert.equal(markdownOf({ contents: { kind: 'markdown', value: 'C' } }), 'C');
  assert.match(markdownOf({ other: 1 }), /^```json\n\{\n {2}"other": 1\n\}\n```$/);
});

void test('file links keep their label, which names the place', () => {
  const md = '1. function add — [sample.py:4](file:///tmp/p/sample.py#L4) and [docs](https://example.org)';
  assert.equal(withoutFileLinks(md), '1. function add — `sample.py:4` and [docs](https://example.org)');
});

void test('statistics are a sorted table, nulls as a dash', () => {
  const md = statsMarkdown({ requests: 3, decode_tok_s: null, engine: 'tiny' });
  assert.deepEqual(md.split('\n').slice(4, 7), ['| decode_tok_s | – |', '| engine | "tiny" |', '| requests | 3 |']);
});

void test('an answer being written shows the question, the header and the text so far', () => {
  assert.equal(deltaOf({ delta: ' adds tax' }), ' adds tax');
  assert.equal(deltaOf({ kind: 'report' }), undefined, 'a work-done progress value is not a delta');
  assert.equal(deltaOf(null), undefined);
  const md = streamingMarkdown('what does it do?', 'It adds tax, see [a.py:2](file:///p/a.py#L2)');
  assert.equal(md, `> what does it do?\n\n${STREAMING}\n\nIt adds tax, see \`a.py:2\`\n`, 'as the whole answer is');
});
