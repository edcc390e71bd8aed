// Unit tests of the next-edit rules: which answer is shown, where, and why a shown edit ends (run by
// tests/e2e/test_vscode.py with `node --test`).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  afterJump, diffMarkdown, firstEdit, type InlineEdit, jumpTarget, oneLine, placement, reasonForChange,
} from '../src/nextEdit.ts';

const uri = 'file:///a.py';
const edit = (line: number, start: number, end: number, text: string, version = 3): InlineEdit => ({
  id: 'e1', text, textDocument: { uri, version },
  range: { start: { line, character: start }, end: { line, character: end } },
  command: { title: 'Accept next edit', command: 'waferline.acceptInlineEdit', arguments: ['e1'] },
});

void test('the first well-formed edit for this document version is taken; a stale or foreign one never', () => {
  const e = edit(4, 8, 14, 'scale_by');
  assert.deepEqual(firstEdit({ edits: [e] }, uri, 3), e);
  assert.equal(firstEdit({ edits: [e] }, uri, 4), undefined, 'made for version 3: stale at 4');
  assert.equal(firstEdit({ edits: [e] }, 'file:///b.py', 3), undefined);
  assert.equal(firstEdit({ edits: [] }, uri, 3), undefined);
  assert.equal(firstEdit(null, uri, 3), undefined);
  assert.deepEqual(firstEdit({ edits: [{ id: 'x' }, e] }, uri, 3), e, 'a malformed alternative is skipped');
});

void test('an edit on another line is away; an insertion ending at the cursor is ghost text; others here', () => {
  assert.equal(placement(edit(9, 4, 10, 'scale_by'), 'factor', { line: 3, character: 0 }), 'away');
  assert.equal(placement(edit(3, 4, 7, 'retval'), 'ret', { line: 3, character: 7 }), 'ghost');
  assert.equal(placement(edit(3, 7, 7, ' + 1'), '', { line: 3, character: 7 }), 'ghost');
  assert.equal(placement(edit(3, 0, 4, 'pass'), 'bass', { line: 3, character: 4 }), 'here', 'a replacement');
  assert.equal(placement(edit(3, 9, 12, 'abc'), '', { line: 3, character: 2 }), 'here', 'after the cursor');
  assert.equal(placement(edit(3, 7, 7, ''), '', { line: 3, character: 7 }), 'here', 'nothing to show as ghost');
});

void test('after Tab jumps to an edit drawn away, an insertion there is ghost text; a replacement stays a preview', () => {
  const insertion = edit(5, 19, 19, ', unit'); // the argument a call lacks, shown with the cursor on line 0
  assert.equal(placement(insertion, '', { line: 0, character: 14 }), 'away');
  assert.deepEqual(afterJump(insertion, ''), { cursor: { line: 5, character: 19 }, placement: 'ghost' });
  const longer = edit(9, 4, 7, 'retval'); // new text that starts with the old: the cursor goes after the old
  assert.deepEqual(afterJump(longer, 'ret'), { cursor: { line: 9, character: 7 }, placement: 'ghost' });
  const rename = edit(9, 11, 17, 'scale_by');
  assert.deepEqual(afterJump(rename, 'factor'), { cursor: { line: 9, character: 11 }, placement: 'here' });
  const deletion = edit(9, 4, 8, '');
  assert.deepEqual(afterJump(deletion, 'pass'), { cursor: { line: 9, character: 4 }, placement: 'here' });
  const lines: InlineEdit = { ...insertion, range: { start: { line: 5, character: 0 }, end: { line: 7, character: 0 } } };
  assert.deepEqual(jumpTarget(lines, 'a\nb\n'), { line: 5, character: 0 }, 'several lines: the start');
  assert.notEqual(afterJump(lines, 'a\nb\n').placement, 'ghost');
  const spanning: InlineEdit = { ...insertion, text: 'x\ny', range: { start: { line: 5, character: 2 },
    end: { line: 6, character: 0 } } }; // prettier-ignore
  assert.notEqual(afterJump(spanning, 'x\n').placement, 'ghost', 'old text over two lines is never ghost text');
});

void test('typing the edit through is told from other changes', () => {
  const before = 'def f(scale_by):\n    return factor\n';
  const start = before.indexOf('factor');
  const after = before.replace('factor', 'scale_by');
  assert.equal(reasonForChange(before, start, start + 6, 'scale_by', after), 'typedThrough');
  assert.equal(reasonForChange(before, start, start + 6, 'scale_by', before.replace('factor', 'scale')), 'ignored');
});

void test('previews: one line with newlines marked, and a diff of old and new lines', () => {
  assert.equal(oneLine('a\nb'), 'a ⏎ b');
  assert.equal(oneLine('x'.repeat(100), 10), 'x'.repeat(9) + '…');
  const md = diffMarkdown('return factor', 'return scale_by', 9);
  assert.match(md, /line 10/);
  assert.match(md, /```diff\n- return factor\n\+ return scale_by\n```/);
  assert.match(diffMarkdown('', 'new', 0), /```diff\n\+ new\n```/, 'an insertion has no - line');
});
