// Next-edit suggestions in the editor: ask the server (`textDocument/copilotInlineEdit`) once typing stops, draw the
// edit it proposes (nextEditDrawing.ts), Tab jumps to it and Tab again accepts it (the edit applied, then the item's command run so
// that the server can offer the next edit of a chain), Escape rejects it. An insertion at the cursor is shown as
// inline-completion ghost text instead (client.ts's middleware asks `ghostItem`), also once Tab has jumped to one
// drawn elsewhere. The rules are in nextEdit.ts.
import * as vscode from 'vscode';
import { type LanguageClient, State } from 'vscode-languageclient/node';
import {
  afterJump,
  DEBOUNCE_MS,
  DID_END_NOTIFICATION,
  DID_SHOW_NOTIFICATION,
  type EndReason,
  firstEdit,
  INLINE_EDIT_REQUEST,
  type InlineEdit,
  type Placement,
  placement,
  reasonForChange,
} from './nextEdit';
import { NextEditDrawing } from './nextEditDrawing';
import { SECTION } from './settings';

export const PENDING_CONTEXT = 'waferline.nextEditPending'; // an edit drawn as a preview: Tab and Escape are ours
export const GHOST_CONTEXT = 'waferline.nextEditGhost'; // an edit shown as ghost text: Escape rejects it
export const ACCEPT_GHOST_COMMAND = 'waferline.nextEdit.acceptedGhost';

interface Shown {
  edit: InlineEdit;
  editor: vscode.TextEditor;
  version: number;
  range: vscode.Range;
  startOffset: number;
  endOffset: number;
  textBefore: string; // the document when the edit was shown, to tell typing it through from other changes
  placement: Placement;
  shownOnLine: number; // where the cursor was: moving to another line (not the edit's) ignores the edit
  jumped: boolean;
}

/** The server's own `nextEdit` option (it answers nothing when off), and completions enabled at all. */
function nextEditEnabled(): boolean {
  const config = vscode.workspace.getConfiguration(SECTION);
  return (config.get<boolean>('nextEdit') ?? true) && (config.get<boolean>('enable') ?? true);
}

function debounceMs(): number {
  return vscode.workspace.getConfiguration(SECTION).get<number>('nextEditDebounceMs') ?? DEBOUNCE_MS;
}

export class NextEdits implements vscode.Disposable {
  private readonly disposables: { dispose(): unknown }[] = [];
  private readonly drawing: NextEditDrawing;
  private shown: Shown | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private inFlight: vscode.CancellationTokenSource | undefined;
  private applying = false; // our own accept is changing the document
  private expectedCursor: vscode.Position | undefined; // the jump's selection change, not the user's

  constructor(
    context: vscode.ExtensionContext,
    private readonly client: () => LanguageClient | undefined,
    private readonly output: vscode.LogOutputChannel,
  ) {
    this.drawing = new NextEditDrawing(context);
    this.disposables.push(
      this.drawing,
      vscode.workspace.onDidChangeTextDocument((e) => { this.onChange(e); }),
      vscode.window.onDidChangeTextEditorSelection((e) => { this.onSelection(e); }),
      vscode.window.onDidChangeActiveTextEditor(() => { this.end('ignored'); }),
      vscode.commands.registerCommand('waferline.nextEdit.tab', () => this.tab()),
      vscode.commands.registerCommand('waferline.nextEdit.accept', () => this.accept()),
      vscode.commands.registerCommand('waferline.nextEdit.dismiss', () => this.dismiss()),
      vscode.commands.registerCommand('waferline.nextEdit.request', () => this.requestNow()),
      vscode.commands.registerCommand(ACCEPT_GHOST_COMMAND, (id: string) => this.acceptedAsGhost(id)),
    ); // fmt: skip
  }

  /** The pending edit as an inline completion item, when it is an insertion at this position (client.ts). */
  ghostItem(document: vscode.TextDocument, position: vscode.Position): vscode.InlineCompletionItem[] | undefined {
    const s = this.shown;
    if (s?.placement !== 'ghost' || s.editor.document !== document || document.version !== s.version) {
      return undefined;
    }
    if (!s.range.end.isEqual(position)) {
      return undefined;
    }
    const item = new vscode.InlineCompletionItem(s.edit.text, s.range, {
      title: 'Accept next edit', command: ACCEPT_GHOST_COMMAND, arguments: [s.edit.id],
    }); // fmt: skip
    return [item];
  }

  private running(): LanguageClient | undefined {
    const client = this.client();
    if (client?.state !== State.Running) {
      return undefined;
    }
    const experimental = client.initializeResult?.capabilities.experimental as { inlineEditProvider?: unknown } | undefined;
    return experimental?.inlineEditProvider === true ? client : undefined;
  }

  private onChange(e: vscode.TextDocumentChangeEvent): void {
    const editor = vscode.window.activeTextEditor;
    if (!editor || e.document !== editor.document || e.contentChanges.length === 0) {
      return;
    }
    const s = this.shown;
    if (s && s.editor.document === e.document && !this.applying) {
      const reason = reasonForChange(s.textBefore, s.startOffset, s.endOffset, s.edit.text, e.document.getText());
      if (reason === 'typedThrough' && s.placement === 'ghost' && e.contentChanges.length === 1) {
        // VS Code accepting the ghost text writes it in one change, then runs the item's command (acceptedAsGhost);
        // without that command soon, the user typed the rest themselves.
        setTimeout(() => {
          if (this.shown === s) {
            this.end('typedThrough');
          }
        }, 500);
        return;
      }
      this.end(reason);
    }
    if (e.reason === vscode.TextDocumentChangeReason.Undo || e.reason === vscode.TextDocumentChangeReason.Redo) {
      return; // an undo is not a direction to follow
    }
    this.schedule(debounceMs());
  }

  private onSelection(e: vscode.TextEditorSelectionChangeEvent): void {
    const s = this.shown;
    if (!s || e.textEditor !== s.editor) {
      return;
    }
    const active = e.selections[0].active;
    if (this.expectedCursor?.isEqual(active)) {
      this.expectedCursor = undefined;
      return;
    }
    const onEdit = active.line >= s.range.start.line && active.line <= s.range.end.line;
    if (!onEdit && active.line !== s.shownOnLine) {
      this.end('ignored');
    }
  }

  private schedule(ms: number): void {
    if (this.timer) {
      clearTimeout(this.timer);
    }
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.requestNow();
    }, ms);
  }

  /** Ask for the next edit at the cursor of the active editor now (also the palette command). */
  async requestNow(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    const client = this.running();
    if (!editor || !client || !nextEditEnabled() || !['file', 'untitled'].includes(editor.document.uri.scheme)) {
      return;
    }
    this.inFlight?.cancel();
    const cts = new vscode.CancellationTokenSource();
    this.inFlight = cts;
    const document = editor.document;
    const version = document.version;
    const uri = client.code2ProtocolConverter.asUri(document.uri);
    const { line, character } = editor.selection.active;
    let result: unknown;
    try {
      result = await client.sendRequest(INLINE_EDIT_REQUEST, {
        textDocument: { uri, version }, position: { line, character },
      }, cts.token); // fmt: skip
    } catch (e) {
      if (!cts.token.isCancellationRequested) {
        this.output.warn(`${INLINE_EDIT_REQUEST} failed: ${String(e)}`);
      }
      return;
    } finally {
      if (this.inFlight === cts) {
        this.inFlight = undefined;
      }
      cts.dispose();
    }
    if (cts.token.isCancellationRequested || document.version !== version || vscode.window.activeTextEditor !== editor) {
      return; // the text or the editor changed while the server thought: the answer is for another text
    }
    const edit = firstEdit(result, uri, version);
    if (edit) {
      this.show(client, editor, edit);
    }
  }

  private show(client: LanguageClient, editor: vscode.TextEditor, edit: InlineEdit): void {
    this.end('ignored'); // one edit on screen at a time: a newer one supersedes it
    const document = editor.document;
    const range = client.protocol2CodeConverter.asRange(edit.range);
    if (!document.validateRange(range).isEqual(range)) {
      this.output.warn(`next edit ${edit.id}: range outside the document, not shown`);
      return;
    }
    const oldText = document.getText(range);
    const cursor = editor.selection.active;
    const where = placement(edit, oldText, { line: cursor.line, character: cursor.character });
    this.shown = {
      edit, editor, version: document.version, range, placement: where, jumped: false, shownOnLine: cursor.line,
      startOffset: document.offsetAt(range.start), endOffset: document.offsetAt(range.end), textBefore: document.getText(),
    }; // fmt: skip
    void client.sendNotification(DID_SHOW_NOTIFICATION, { item: { id: edit.id } });
    if (where === 'ghost') {
      void this.showAsGhost();
      return;
    }
    this.drawing.draw(editor, range, oldText, edit);
    void vscode.commands.executeCommand('setContext', PENDING_CONTEXT, true);
    this.showStatus();
  }

  /** Draw the shown edit as ghost text: VS Code's inline request (client.ts's middleware asks `ghostItem`) answers
   * it, so Tab accepts it as any suggestion and Escape rejects it (GHOST_CONTEXT); no preview, no status item. */
  private async showAsGhost(): Promise<void> {
    const s = this.shown;
    if (!s) {
      return;
    }
    this.drawing.clear(s.editor);
    void vscode.commands.executeCommand('setContext', PENDING_CONTEXT, false); // Tab is VS Code's now
    await vscode.commands.executeCommand('setContext', GHOST_CONTEXT, true); // (sent at once: a clear() comes after)
    if (this.shown === s) {
      await vscode.commands.executeCommand('editor.action.inlineSuggest.trigger');
    }
  }

  private showStatus(): void {
    const s = this.shown;
    if (!s) {
      this.drawing.clear();
      return;
    }
    const here = s.jumped || s.editor.selection.active.line === s.range.start.line;
    this.drawing.showStatus(s.editor, s.range, s.edit, here);
  }

  /** Tab: jump to an edit away from the cursor; on it (or on its line) accept it. After the jump the placement is
   * worked out again for the new cursor: an insertion at it turns into ghost text, which the next Tab accepts. */
  private async tab(): Promise<void> {
    const s = this.shown;
    if (!s) {
      await vscode.commands.executeCommand('tab'); // the key's usual meaning (the keybinding's `when` avoids this)
      return;
    }
    const cursor = s.editor.selection.active;
    const onEdit = cursor.line >= s.range.start.line && cursor.line <= s.range.end.line;
    if (s.placement === 'away' && !s.jumped && !onEdit) {
      const jump = afterJump(s.edit, s.editor.document.getText(s.range));
      const target = new vscode.Position(jump.cursor.line, jump.cursor.character);
      s.jumped = true;
      this.expectedCursor = target;
      s.editor.selection = new vscode.Selection(target, target);
      s.editor.revealRange(s.range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
      if (jump.placement === 'ghost') {
        s.placement = 'ghost';
        s.shownOnLine = target.line; // ghost text is drawn only here: going back to the old line ignores it
        await this.showAsGhost();
        return;
      }
      this.showStatus();
      return;
    }
    await this.accept();
  }

  /** Apply the shown edit, run its command (the server marks it accepted), and ask for the next one. */
  async accept(): Promise<void> {
    const s = this.shown;
    const client = this.running();
    if (!s || !client) {
      return;
    }
    const document = s.editor.document;
    if (document.version !== s.version) {
      this.end('ignored');
      return;
    }
    this.clear();
    this.applying = true;
    let applied: boolean;
    try {
      applied = await s.editor.edit((b) => { b.replace(s.range, s.edit.text); }); // fmt: skip
    } finally {
      this.applying = false;
    }
    if (!applied) {
      this.output.warn(`next edit ${s.edit.id}: the editor refused the edit`);
      void client.sendNotification(DID_END_NOTIFICATION, { id: s.edit.id, reason: 'ignored' });
      return;
    }
    const end = document.positionAt(s.startOffset + s.edit.text.length);
    this.expectedCursor = end;
    s.editor.selection = new vscode.Selection(end, end);
    await this.reportAccepted(client, s.edit);
  }

  private async acceptedAsGhost(id: string): Promise<void> {
    const s = this.shown;
    const client = this.running();
    if (s?.edit.id !== id || !client) {
      return;
    }
    this.clear();
    await this.reportAccepted(client, s.edit);
  }

  private async reportAccepted(client: LanguageClient, edit: InlineEdit): Promise<void> {
    void client.sendNotification(DID_END_NOTIFICATION, { id: edit.id, reason: 'accepted' });
    if (edit.command) {
      try {
        await client.sendRequest('workspace/executeCommand', {
          command: edit.command.command, arguments: edit.command.arguments ?? [],
        }); // fmt: skip
      } catch (e) {
        this.output.warn(`${edit.command.command} failed: ${String(e)}`);
      }
    }
    this.schedule(0); // the next edit of the chain, if the server has one
  }

  private async dismiss(): Promise<void> {
    const ghost = this.shown?.placement === 'ghost';
    this.end('rejected');
    if (ghost) {
      await vscode.commands.executeCommand('editor.action.inlineSuggest.hide');
    }
  }

  /** Stop showing the edit and tell the server why (once per shown edit). */
  private end(reason: EndReason): void {
    const s = this.shown;
    if (!s) {
      return;
    }
    this.clear();
    const client = this.running();
    if (client) {
      void client.sendNotification(DID_END_NOTIFICATION, { id: s.edit.id, reason });
    }
  }

  private clear(): void {
    const s = this.shown;
    this.shown = undefined;
    this.drawing.clear(s?.editor);
    void vscode.commands.executeCommand('setContext', PENDING_CONTEXT, false);
    void vscode.commands.executeCommand('setContext', GHOST_CONTEXT, false);
  }

  dispose(): void {
    if (this.timer) {
      clearTimeout(this.timer);
    }
    this.inFlight?.cancel();
    this.end('ignored');
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
