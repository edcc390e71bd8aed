// Next-edit suggestions, the rules without VS Code (unit-tested with node --test; nextEditView.ts draws them).
// The server (docs/next-edit.md) answers `textDocument/copilotInlineEdit` with an edit that may lie anywhere in the
// document; the client shows it, Tab jumps to it and Tab again accepts it, Escape rejects it, and every shown edit
// ends with exactly one `waferline/didEndInlineEdit`: accepted, rejected, ignored (the cursor went elsewhere, or the
// text changed under it) or typedThrough (the user typed the edit themselves).

export const INLINE_EDIT_REQUEST = 'textDocument/copilotInlineEdit';
export const DID_SHOW_NOTIFICATION = 'textDocument/didShowInlineEdit';
export const DID_END_NOTIFICATION = 'waferline/didEndInlineEdit';
export const DEBOUNCE_MS = 150; // after the last change: the server's structural candidates answer in a few ms

export type EndReason = 'accepted' | 'rejected' | 'ignored' | 'typedThrough';

export interface Pos {
  line: number;
  character: number;
}

export interface Range {
  start: Pos;
  end: Pos;
}

export interface Command {
  title: string;
  command: string;
  arguments?: unknown[];
}

/** One edit of the server's answer (the protocol's InlineEdit). */
export interface InlineEdit {
  id: string;
  text: string;
  textDocument: { uri: string; version: number };
  range: Range;
  kind?: string;
  command?: Command;
}

function isPos(p: unknown): p is Pos {
  const o = p as Pos | null;
  return typeof o === 'object' && o !== null && Number.isInteger(o.line) && Number.isInteger(o.character);
}

/** The first well-formed edit of an answer for this document version, or undefined (none, stale or malformed). */
export function firstEdit(result: unknown, uri: string, version: number): InlineEdit | undefined {
  const edits = (result as { edits?: unknown } | null)?.edits;
  if (!Array.isArray(edits)) {
    return undefined;
  }
  for (const e of edits as Partial<InlineEdit>[]) {
    const range = e.range;
    if (typeof e.id !== 'string' || typeof e.text !== 'string' || !range || !isPos(range.start) || !isPos(range.end)) {
      continue;
    }
    if (e.textDocument?.uri !== uri || e.textDocument.version !== version) {
      return undefined; // made for other text: never shown, never applied
    }
    return e as InlineEdit;
  }
  return undefined;
}

/** Where an edit is drawn: `ghost` as inline-completion ghost text (an insertion at the cursor, on its line),
 * `here` as a preview on the cursor's line (Tab accepts at once), `away` as a preview elsewhere (Tab jumps first). */
export type Placement = 'ghost' | 'here' | 'away';

/** `oldText` is the document's text in the edit's range. */
export function placement(edit: InlineEdit, oldText: string, cursor: Pos): Placement {
  const { start, end } = edit.range;
  const onCursorLine = start.line === cursor.line && end.line === cursor.line;
  if (!onCursorLine) {
    return 'away';
  }
  const endsAtCursor = end.character === cursor.character;
  return endsAtCursor && edit.text.startsWith(oldText) && edit.text.length > oldText.length ? 'ghost' : 'here';
}

/** Where Tab's jump puts the cursor: after the old text of an edit on one line that only adds to it (an insertion,
 * or new text that starts with the old), where the rest goes; at the edit's start otherwise. */
export function jumpTarget(edit: InlineEdit, oldText: string): Pos {
  const { start, end } = edit.range;
  const adds = start.line === end.line && edit.text.startsWith(oldText) && edit.text.length > oldText.length;
  return adds ? end : start;
}

/** The cursor and the placement after Tab jumped to an edit drawn away: the placement is worked out again for the
 * new cursor, so an insertion there becomes ghost text (the next Tab accepts it as any suggestion). */
export function afterJump(edit: InlineEdit, oldText: string): { cursor: Pos; placement: Placement } {
  const cursor = jumpTarget(edit, oldText);
  return { cursor, placement: placement(edit, oldText, cursor) };
}

/** A compact one-line preview of the new text for an inline decoration (newlines shown as ⏎). */
export function oneLine(text: string, max = 80): string {
  const flat = text.replace(/\r?\n/g, ' ⏎ ');
  return flat.length > max ? flat.slice(0, max - 1) + '…' : flat;
}

/** The edit as a unified-diff-like Markdown block: old lines with `-`, new lines with `+`. */
export function diffMarkdown(oldText: string, newText: string, lineNumber: number): string {
  const minus = oldText === '' ? [] : oldText.split(/\r?\n/).map((l) => `- ${l}`);
  const plus = newText === '' ? [] : newText.split(/\r?\n/).map((l) => `+ ${l}`);
  const fence = '```';
  return `**waferline: next edit** (line ${lineNumber + 1})\n\n${fence}diff\n${[...minus, ...plus].join('\n')}\n${fence}\n`;
}

/** The text with [start, end) (offsets) replaced by `insert`. */
export function applyAt(text: string, start: number, end: number, insert: string): string {
  return text.slice(0, start) + insert + text.slice(end);
}

/** Why a shown edit ends when the document changes under it: typed through when the new text is exactly the text
 * with the edit applied (`before` and the edit's offsets as they were when shown), ignored otherwise. */
export function reasonForChange(before: string, start: number, end: number, insert: string, after: string): EndReason {
  return applyAt(before, start, end, insert) === after ? 'typedThrough' : 'ignored';
}
