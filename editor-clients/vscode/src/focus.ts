// Telling the server where the user is: `waferline/didFocus` with the document's URI and the cursor, when the
// active editor changes (a file opened or switched to) and when a click places the cursor. LSP has no such
// notification; the server prefills the next suggestion's prompt there before the user types (docs/configuration.md).
// No VS Code import here, so the rules are unit-tested with node --test; client.ts wires the editor's events to it.

export const FOCUS_NOTIFICATION = 'waferline/didFocus';
export const CLICK_DELAY_MS = 150; // a click is reported once the cursor has stayed put this long (not every drag)

export interface FocusParams {
  textDocument: { uri: string };
  position: { line: number; character: number };
}

interface Timers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const realTimers: Timers = {
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (handle) => {
    clearTimeout(handle as ReturnType<typeof setTimeout>);
  },
};

/** Sends a focus notification per place the user lands on: at once for an editor change, after a short pause for a
 * click; the same place twice in a row is sent once. */
export class FocusReporter {
  private readonly send: (params: FocusParams) => void;
  private readonly timers: Timers;
  private pending: unknown;
  private last = '';

  constructor(send: (params: FocusParams) => void, timers: Timers = realTimers) {
    this.send = send;
    this.timers = timers;
  }

  /** The active editor changed to `uri` with its cursor at (line, character) (UTF-16, as VS Code counts). */
  editorChanged(uri: string, line: number, character: number): void {
    this.cancelPending();
    this.report({ textDocument: { uri }, position: { line, character } });
  }

  /** A click put the cursor at (line, character) in `uri`; reported unless another comes within CLICK_DELAY_MS. */
  cursorPlaced(uri: string, line: number, character: number): void {
    this.cancelPending();
    this.pending = this.timers.set(() => {
      this.pending = undefined;
      this.report({ textDocument: { uri }, position: { line, character } });
    }, CLICK_DELAY_MS);
  }

  dispose(): void {
    this.cancelPending();
  }

  private cancelPending(): void {
    if (this.pending !== undefined) {
      this.timers.clear(this.pending);
      this.pending = undefined;
    }
  }

  private report(params: FocusParams): void {
    const key = `${params.textDocument.uri}:${params.position.line}:${params.position.character}`;
    if (key !== this.last) {
      this.last = key;
      this.send(params);
    }
  }
}
