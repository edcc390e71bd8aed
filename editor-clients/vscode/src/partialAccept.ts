// Keeping part of an inline suggestion: VS Code's own "accept next word" and "accept next line" commands, run
// through waferline's so that the text each keeps can be reported to the server, as can the rest that Tab keeps:
// `waferline/didAcceptCompletionText` {textDocument: {uri}, kind: "word" | "line" | "full", text}. The server adds the
// characters up (`waferline/stats`), so that a benchmark can report kept characters per shown suggestion
// (docs/editors.md). No VS Code import here (unit-tested with node --test); partialAcceptCommands.ts wires it up.

export const ACCEPT_TEXT_NOTIFICATION = 'waferline/didAcceptCompletionText';
export type AcceptKind = 'word' | 'line' | 'full';

export interface AcceptTextParams {
  textDocument: { uri: string };
  kind: AcceptKind;
  text: string;
}

export interface Change {
  rangeOffset: number;
  rangeLength: number;
  text: string;
}

/** The characters an accept added, from the document changes it made: one change, whose replaced range (what
 * the user had typed of the suggestion, which an accept writes again) is the start of its text. Undefined when the
 * changes do not look like an accept. */
export function keptText(changes: readonly Change[]): string | undefined {
  if (changes.length !== 1) {
    return undefined;
  }
  const [change] = changes;
  if (change.text.length <= change.rangeLength) {
    return undefined;
  }
  return change.text.slice(change.rangeLength);
}
