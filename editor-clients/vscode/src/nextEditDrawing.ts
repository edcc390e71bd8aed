// How a next edit away from the cursor is drawn (nextEditView.ts decides when): the old text struck through, the new
// text beside it, a gutter arrow, a diff in the hover, and the edit's line in the status bar with what Tab does.
import * as path from 'node:path';
import * as vscode from 'vscode';
import { diffMarkdown, type InlineEdit, oneLine } from './nextEdit';

export class NextEditDrawing implements vscode.Disposable {
  private readonly removed: vscode.TextEditorDecorationType;
  private readonly inserted: vscode.TextEditorDecorationType;
  private readonly gutter: vscode.TextEditorDecorationType;
  private readonly status: vscode.StatusBarItem;

  constructor(context: vscode.ExtensionContext) {
    this.removed = vscode.window.createTextEditorDecorationType({
      backgroundColor: new vscode.ThemeColor('diffEditor.removedTextBackground'),
      textDecoration: 'line-through',
      overviewRulerColor: new vscode.ThemeColor('editorOverviewRuler.modifiedForeground'),
      overviewRulerLane: vscode.OverviewRulerLane.Center,
    });
    this.inserted = vscode.window.createTextEditorDecorationType({
      overviewRulerColor: new vscode.ThemeColor('editorOverviewRuler.modifiedForeground'),
      overviewRulerLane: vscode.OverviewRulerLane.Center,
    });
    this.gutter = vscode.window.createTextEditorDecorationType({
      gutterIconPath: vscode.Uri.file(path.join(context.extensionPath, 'media', 'next-edit.svg')),
      gutterIconSize: 'contain',
    });
    this.status = vscode.window.createStatusBarItem('waferline.nextEdit', vscode.StatusBarAlignment.Right, 99);
    this.status.name = 'waferline next edit';
    this.status.command = 'waferline.nextEdit.tab';
  }

  /** Draw `edit` over `range` (whose text is `oldText`) in `editor`. */
  draw(editor: vscode.TextEditor, range: vscode.Range, oldText: string, edit: InlineEdit): void {
    const hover = new vscode.MarkdownString(diffMarkdown(oldText, edit.text, range.start.line));
    const preview = { contentText: edit.text === '' ? ' ⌫' : ` ${oneLine(edit.text)} `,
      backgroundColor: new vscode.ThemeColor('diffEditor.insertedTextBackground'),
      color: new vscode.ThemeColor('editor.foreground'), fontStyle: 'italic' }; // fmt: skip
    if (oldText !== '') {
      editor.setDecorations(this.removed, [{ range, hoverMessage: hover }]);
    }
    editor.setDecorations(this.inserted, [{ range: new vscode.Range(range.end, range.end), hoverMessage: hover,
      renderOptions: { after: preview } }]); // fmt: skip
    editor.setDecorations(this.gutter, [{ range: new vscode.Range(range.start, range.start) }]);
  }

  /** The status bar item for `edit` over `range`: its line, and whether Tab accepts (`here`) or jumps to it. */
  showStatus(editor: vscode.TextEditor, range: vscode.Range, edit: InlineEdit, here: boolean): void {
    this.status.text = `$(arrow-right) next edit: line ${range.start.line + 1} · Tab to ${here ? 'accept' : 'jump'}, Esc to dismiss`;
    this.status.tooltip = new vscode.MarkdownString(diffMarkdown(editor.document.getText(range), edit.text,
      range.start.line)); // fmt: skip
    this.status.show();
  }

  /** Take the drawing off `editor` (when given) and hide the status item. */
  clear(editor?: vscode.TextEditor): void {
    if (editor) {
      for (const d of [this.removed, this.inserted, this.gutter]) {
        editor.setDecorations(d, []);
      }
    }
    this.status.hide();
  }

  dispose(): void {
    for (const d of [this.removed, this.inserted, this.gutter, this.status]) {
      d.dispose();
    }
  }
}
