// `waferline.acceptNextWord` / `waferline.acceptNextLine` (bound to the keys in package.json while ghost text is
// shown) run VS Code's own editor.action.inlineSuggest.acceptNextWord / acceptNextLine and report the text each kept;
// Tab's full accept is reported from the item's command (client.ts calls `fullAccept`). See partialAccept.ts.
import * as vscode from 'vscode';
import { type AcceptKind, keptText } from './partialAccept';

const BUILT_IN: Record<Exclude<AcceptKind, 'full'>, string> = {
  word: 'editor.action.inlineSuggest.acceptNextWord',
  line: 'editor.action.inlineSuggest.acceptNextLine',
};
const CHANGE_WAIT_MS = 1000; // the document change reaches the extension host shortly after the command returns
const RECENT_MS = 1000; // a full accept's change comes just before its command

export class PartialAccept implements vscode.Disposable {
  private readonly disposables: vscode.Disposable[] = [];
  private partialInFlight = 0; // a word or line accept waiting for its change
  private last: { document: vscode.TextDocument; changes: readonly vscode.TextDocumentContentChangeEvent[]; at: number } | undefined;

  constructor(private readonly send: (document: vscode.TextDocument, kind: AcceptKind, text: string) => void) {
    this.disposables.push(
      vscode.workspace.onDidChangeTextDocument((e) => {
        if (e.contentChanges.length > 0) {
          this.last = { document: e.document, changes: e.contentChanges, at: Date.now() };
        }
      }),
      vscode.commands.registerCommand('waferline.acceptNextWord', () => this.partial('word')),
      vscode.commands.registerCommand('waferline.acceptNextLine', () => this.partial('line')),
    );
  }

  private async partial(kind: 'word' | 'line'): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
      return;
    }
    this.partialInFlight += 1;
    try {
      await this.keepPart(editor, kind);
    } finally {
      this.partialInFlight -= 1;
    }
  }

  private async keepPart(editor: vscode.TextEditor, kind: 'word' | 'line'): Promise<void> {
    const document = editor.document;
    const changed = new Promise<readonly vscode.TextDocumentContentChangeEvent[] | undefined>((resolve) => {
      const timer = setTimeout(() => {
        sub.dispose();
        resolve(undefined);
      }, CHANGE_WAIT_MS);
      const sub = vscode.workspace.onDidChangeTextDocument((e) => {
        if (e.document === document && e.contentChanges.length > 0) {
          clearTimeout(timer);
          sub.dispose();
          resolve(e.contentChanges);
        }
      });
    });
    await vscode.commands.executeCommand(BUILT_IN[kind]);
    const changes = await changed;
    const text = changes && keptText(changes);
    if (text) {
      this.send(document, kind, text);
    }
  }

  /** The item's accept command ran: Tab kept the rest of the suggestion, the document's latest change. */
  fullAccept(uri: unknown, asUri: (document: vscode.TextDocument) => string): void {
    if (this.partialInFlight > 0) {
      return; // a partial accept that kept all that was left: VS Code runs the item's command, the part is reported
    }
    const last = this.last;
    if (!last || asUri(last.document) !== uri || Date.now() - last.at > RECENT_MS) {
      return;
    }
    const text = keptText(last.changes);
    this.last = undefined;
    if (text) {
      this.send(last.document, 'full', text);
    }
  }

  dispose(): void {
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
