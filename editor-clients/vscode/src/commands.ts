// The palette commands: enable/disable completions, ask a question about the repository, show statistics,
// restart the server. Answers and statistics open as Markdown previews of a read-only virtual document; an answer
// the model writes is previewed as it comes (the ask's partialResultToken), then replaced by the whole result.
import * as vscode from 'vscode';
import { ProgressType } from 'vscode-languageclient/node';
import { ASK_REQUEST, type WaferlineClient } from './client';
import { deltaOf, markdownOf, statsMarkdown, streamingMarkdown, withoutFileLinks } from './markdown';
import { setCompletionsEnabled } from './settings';

const SCHEME = 'waferline';

/** Read-only documents under waferline:/… whose text the commands set before opening a preview. */
class AnswerDocuments implements vscode.TextDocumentContentProvider {
  private readonly texts = new Map<string, string>();
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;

  set(name: string, markdown: string): vscode.Uri {
    const uri = vscode.Uri.from({ scheme: SCHEME, path: `/${name}.md` });
    this.texts.set(uri.toString(), markdown);
    this.changed.fire(uri);
    return uri;
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.toString()) ?? '';
  }
}

async function preview(uri: vscode.Uri): Promise<void> {
  await vscode.commands.executeCommand('markdown.showPreview', uri);
}

export function registerCommands(context: vscode.ExtensionContext, waferline: WaferlineClient): void {
  const documents = new AnswerDocuments();
  let question = 0;

  const ask = async (): Promise<void> => {
    const client = waferline.running;
    if (!client) {
      void vscode.window.showWarningMessage('waferline: the server is not running. Run "waferline: Restart the server".');
      return;
    }
    const text = await vscode.window.showInputBox({
      title: 'waferline: ask a question about the repository',
      prompt: 'The answer cites definitions and usages from the workspace index.',
      placeHolder: 'Where is the tokenizer loaded?',
      ignoreFocusOut: true,
    });
    if (!text?.trim()) {
      return;
    }
    const editor = vscode.window.activeTextEditor;
    const params: Record<string, unknown> = { question: text.trim() };
    if (editor) {
      params.textDocument = { uri: editor.document.uri.toString() };
      params.position = { line: editor.selection.active.line, character: editor.selection.active.character };
    }
    question += 1;
    const name = `answer-${question}`;
    const partialResultToken = `waferline-ask-${question}`;
    params.partialResultToken = partialResultToken;
    let streamed = '';
    let opened = false;
    const deltas = client.onProgress(new ProgressType<unknown>(), partialResultToken, (value) => {
      const delta = deltaOf(value);
      if (delta === undefined) {
        return;
      }
      streamed += delta;
      const uri = documents.set(name, streamingMarkdown(text.trim(), streamed)); // an open preview follows it
      if (!opened) {
        opened = true;
        void preview(uri);
      }
    });
    try {
      const result = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: 'waferline: thinking…', cancellable: true },
        (_progress, token) => client.sendRequest(ASK_REQUEST, params, token),
      );
      const body = `> ${text.trim()}\n\n${withoutFileLinks(markdownOf(result))}\n`;
      await preview(documents.set(name, body));
    } catch (e) {
      const code = (e as { code?: number }).code;
      if (code === -32601) {
        void vscode.window.showWarningMessage(
          'waferline: this server cannot answer questions (it has no waferline/ask). Update waferline.',
        );
      } else {
        void vscode.window.showErrorMessage(`waferline: the question failed: ${e instanceof Error ? e.message : String(e)}`);
      }
    } finally {
      deltas.dispose();
    }
  };
  waferline.askHandler = ask;

  context.subscriptions.push(
    vscode.workspace.registerTextDocumentContentProvider(SCHEME, documents),
    vscode.commands.registerCommand('waferline.enable', async () => {
      await setCompletionsEnabled(true);
      void vscode.window.setStatusBarMessage('waferline: completions on', 3000);
    }),
    vscode.commands.registerCommand('waferline.disable', async () => {
      await setCompletionsEnabled(false);
      void vscode.window.setStatusBarMessage('waferline: completions off', 3000);
    }),
    vscode.commands.registerCommand('waferline.showStats', async () => {
      try {
        const stats = await waferline.stats();
        await preview(documents.set('statistics', statsMarkdown(stats)));
      } catch (e) {
        void vscode.window.showWarningMessage(`waferline: no statistics: ${(e as Error).message}`);
      }
    }),
    vscode.commands.registerCommand('waferline.restart', async () => {
      await waferline.restart();
    }),
  );
}

/**
 * `waferline.ask` is registered here unless the server registers a command of that name itself (the language
 * client then owns it, and the middleware routes a palette call to `ask`). Call after each server start.
 */
export function registerAskCommand(waferline: WaferlineClient): vscode.Disposable | undefined {
  if (waferline.serverProvidesCommand('waferline.ask') || !waferline.askHandler) {
    return undefined;
  }
  const handler = waferline.askHandler;
  return vscode.commands.registerCommand('waferline.ask', () => handler());
}
