// The language client's lifecycle: find the server, start it with the settings, keep the status bar current,
// restart on demand. Everything the user sees of completions comes from the server; this file only connects.
import * as vscode from 'vscode';
import {
  CloseAction,
  CompletionRequest,
  type DynamicFeature,
  ErrorAction,
  LanguageClient,
  type StaticFeature,
  type LanguageClientOptions,
  type Middleware,
  type ServerOptions,
  State,
  TransportKind,
} from 'vscode-languageclient/node';
import { type EngineState, engineStatus } from './engineState';
import { FOCUS_NOTIFICATION, FocusReporter } from './focus';
import { NextEdits } from './nextEditView';
import { ACCEPT_TEXT_NOTIFICATION, type AcceptTextParams } from './partialAccept';
import { PartialAccept } from './partialAcceptCommands';
import { REWRITE_COMMAND, withInstruction } from './rewrite';
import { resolveServerCommand } from './serverCommand';
import { completionsEnabled, launchSettings, SECTION, serverOptionNames, serverSettings } from './settings';
import type { StatusBar } from './statusBar';

export const STATS_REQUEST = 'waferline/stats';
export const ASK_REQUEST = 'waferline/ask';
export const ENGINE_STATE_NOTIFICATION = 'waferline/engineState';
export const ACCEPT_COMMAND = 'waferline.accept'; // the command the server's inline completion items carry
const NO_ENGINE = 'no engine loaded';

/** The figures `waferline/stats` returns that the status bar uses (the rest is shown as is). */
export interface ServerStats {
  decode_tok_s?: number | null;
  engine?: string; // the model and backend, or NO_ENGINE while the model loads
  [key: string]: unknown;
}

/**
 * VS Code shows waferline's suggestions as inline completions. The server's `textDocument/completion` fallback
 * (for editors without inline completion) answers VS Code with empty lists, and each such suggest session cancels
 * the inline request in flight, so the completion feature is not registered at all.
 */
class InlineOnlyLanguageClient extends LanguageClient {
  override registerFeature(feature: StaticFeature | DynamicFeature<unknown>): void {
    if ('registrationType' in feature && feature.registrationType.method === CompletionRequest.method) {
      return;
    }
    super.registerFeature(feature);
  }
}

export class WaferlineClient implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private readonly optionNames: string[];
  private sentOptions = new Set<string>(); // the option names the user had set when the server last heard
  private readonly disposables: { dispose(): unknown }[] = [];
  private focus: FocusReporter | undefined; // tells the running server where the user is (waferline/didFocus)
  private readonly nextEdits: NextEdits; // next-edit suggestions (nextEditView.ts)
  private readonly partialAccept: PartialAccept; // reports the text each accept keeps (partialAcceptCommands.ts)
  /** Set by the extension: shows the ask UI when the server's own `waferline.ask` command is run. */
  askHandler: (() => Promise<void>) | undefined;

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly status: StatusBar,
    private readonly output: vscode.LogOutputChannel,
  ) {
    this.optionNames = serverOptionNames(context.extension.packageJSON);
    this.nextEdits = new NextEdits(context, () => this.client, output);
    this.partialAccept = new PartialAccept((document, kind, text) => {
      const client = this.running;
      if (client) {
        const params: AcceptTextParams = { textDocument: { uri: client.code2ProtocolConverter.asUri(document.uri) }, kind, text };
        void client.sendNotification(ACCEPT_TEXT_NOTIFICATION, params);
      }
    });
    this.disposables.push(this.nextEdits, this.partialAccept);
    this.disposables.push(vscode.workspace.onDidChangeConfiguration((e) => {
        this.onConfigurationChanged(e);
      }),
      vscode.window.onDidChangeActiveTextEditor((editor) => {
        this.reportFocus(editor, false);
      }),
      vscode.window.onDidChangeTextEditorSelection((e) => {
        if (e.kind === vscode.TextEditorSelectionChangeKind.Mouse && e.textEditor === vscode.window.activeTextEditor) {
          this.reportFocus(e.textEditor, true);
        }
      }),
    );
  }

  get running(): LanguageClient | undefined {
    return this.client?.state === State.Running ? this.client : undefined;
  }

  /** Whether the running server registered a command of this name (then the language client owns it). */
  serverProvidesCommand(command: string): boolean {
    const commands = this.client?.initializeResult?.capabilities.executeCommandProvider?.commands ?? [];
    return commands.includes(command);
  }

  async start(): Promise<void> {
    const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
    const launch = launchSettings();
    const resolved = resolveServerCommand(launch.path, launch.args, folders);
    if (resolved instanceof Error) {
      this.status.setState('error', 'server not found');
      this.output.error(resolved.message);
      void this.showNotFound(resolved.message);
      return;
    }
    this.output.info(`starting ${resolved.command} ${resolved.args.join(' ')} (found in ${resolved.source})`);
    this.status.setState('starting');
    const serverOptions: ServerOptions = {
      command: resolved.command,
      args: resolved.args,
      transport: TransportKind.stdio,
      options: { cwd: folders[0] },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: 'file' }, { scheme: 'untitled' }],
      outputChannel: this.output,
      initializationOptions: { [SECTION]: this.settingsToSend() },
      middleware: this.middleware(),
      errorHandler: {
        error: () => ({ action: ErrorAction.Continue }),
        closed: () => {
          this.status.setState('error', 'the server stopped');
          return { action: CloseAction.DoNotRestart, message: 'The waferline server stopped. Run "waferline: Restart the server".' };
        },
      },
    };
    const client = new InlineOnlyLanguageClient('waferline', 'waferline', serverOptions, clientOptions);
    this.client = client;
    // The engine's state as it changes (loaded, a remote engine down or back): the status bar follows it.
    client.onNotification(ENGINE_STATE_NOTIFICATION, (params: EngineState) => {
      this.showEngineState(params);
    });
    try {
      await client.start();
    } catch (e) {
      this.status.setState('error', 'failed to start');
      this.output.error(`the server failed to start: ${String(e)}`);
      void vscode.window.showErrorMessage(
        `waferline: the server (${resolved.command}) failed to start. See the waferline output for its log.`,
        'Show Output',
      ).then((choice) => {
        if (choice) {
          this.output.show();
        }
      });
      return;
    }
    this.status.setState('starting', 'loading the model');
    this.trackFocus(client);
    void this.waitForModel(client);
  }

  private showEngineState(params: EngineState): void {
    const { state, detail } = engineStatus(params);
    if (state === 'ready' && !completionsEnabled()) {
      this.status.setState('disabled', detail);
      return;
    }
    if (state !== 'ready') {
      this.output.warn(`engine ${params.state}: ${detail}`);
    }
    this.status.setState(state, detail);
  }

  /** `waferline/didFocus` for the running server: for the editor active now, then (the listeners registered in the
   * constructor) on every change of the active editor and when a click places the cursor. */
  private trackFocus(client: LanguageClient): void {
    this.focus?.dispose();
    this.focus = new FocusReporter((params) => {
      if (this.client === client && client.state === State.Running) {
        void client.sendNotification(FOCUS_NOTIFICATION, params);
      }
    });
    this.reportFocus(vscode.window.activeTextEditor, false);
  }

  /** Where the user is, for the documents the client syncs (file and untitled), with no selection. */
  private reportFocus(editor: vscode.TextEditor | undefined, click: boolean): void {
    const client = this.client;
    if (!this.focus || !client || !editor || !['file', 'untitled'].includes(editor.document.uri.scheme)) {
      return;
    }
    if (!editor.selection.isEmpty) {
      return;
    }
    const uri = client.code2ProtocolConverter.asUri(editor.document.uri);
    const { line, character } = editor.selection.active;
    if (click) {
      this.focus.cursorPlaced(uri, line, character);
    } else {
      this.focus.editorChanged(uri, line, character);
    }
  }

  /** The server loads its model after `initialized`; its stats say "no engine loaded" until then. */
  private async waitForModel(client: LanguageClient): Promise<void> {
    for (;;) {
      if (this.client !== client || client.state !== State.Running) {
        return;
      }
      try {
        const stats = await client.sendRequest<ServerStats>(STATS_REQUEST, {});
        if (typeof stats.engine === 'string' && stats.engine.startsWith('failed to load')) {
          this.output.error(`the model ${stats.engine}`); // the server also tells the user with showMessage
          this.status.setState('error', stats.engine);
          return;
        }
        if (typeof stats.engine === 'string' && stats.engine !== NO_ENGINE) {
          this.output.info(`model loaded: ${stats.engine}`);
          this.showEngineState({
            state: typeof stats.engine_state === 'string' ? stats.engine_state : 'ready',
            problems: (stats.engine_problems as Record<string, string> | undefined) ?? {},
            engine: stats.engine,
            chatEngine: typeof stats.chat_engine === 'string' ? stats.chat_engine : undefined,
          });
          this.status.setFigures(undefined, typeof stats.decode_tok_s === 'number' ? stats.decode_tok_s : undefined);
          return;
        }
      } catch (e) {
        this.output.warn(`waferline/stats failed: ${String(e)}`);
        this.status.setState(completionsEnabled() ? 'ready' : 'disabled');
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.focus?.dispose();
    this.focus = undefined;
    if (client && client.state !== State.Stopped) {
      await client.stop(2000);
    }
    this.status.setState('stopped');
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  async stats(): Promise<ServerStats> {
    const client = this.running;
    if (!client) {
      throw new Error('the waferline server is not running');
    }
    return client.sendRequest<ServerStats>(STATS_REQUEST, {});
  }

  private async refreshStats(): Promise<void> {
    try {
      const stats = await this.stats();
      this.status.setFigures(undefined, typeof stats.decode_tok_s === 'number' ? stats.decode_tok_s : undefined);
    } catch (e) {
      this.output.debug(`waferline/stats failed: ${String(e)}`);
    }
  }

  private middleware(): Middleware {
    return {
      provideInlineCompletionItems: async (document, position, context, token, next) => {
        if (!completionsEnabled()) {
          return null;
        }
        const nextEdit = this.nextEdits.ghostItem(document, position); // a next edit that is an insertion here
        if (nextEdit) {
          return nextEdit;
        }
        const t0 = performance.now();
        const result = await next(document, position, context, token);
        const items = Array.isArray(result) ? result : (result?.items ?? []);
        if (items.length > 0 && !token.isCancellationRequested) {
          this.status.setFigures(performance.now() - t0, undefined);
          void this.refreshStats();
        }
        return result;
      },
      executeCommand: async (command, args, next) => {
        // The server may own `waferline.ask`; run without arguments (from the palette) it gets the question UI.
        if (command === 'waferline.ask' && args.length === 0 && this.askHandler) {
          return this.askHandler();
        }
        if (command === ACCEPT_COMMAND && this.client) {
          const converter = this.client.code2ProtocolConverter;
          this.partialAccept.fullAccept(args[0], (document) => converter.asUri(document.uri));
        }
        if (command === REWRITE_COMMAND) {
          const withIt = await withInstruction(args, () => askInstruction());
          return withIt === undefined ? undefined : (next(command, withIt) as unknown);
        }
        return next(command, args) as unknown;
      },
    };
  }

  private onConfigurationChanged(e: vscode.ConfigurationChangeEvent): void {
    if (!e.affectsConfiguration(SECTION)) {
      return;
    }
    if (e.affectsConfiguration(`${SECTION}.server`)) {
      this.output.info('server settings changed: restarting');
      void this.restart();
      return;
    }
    if (e.affectsConfiguration(`${SECTION}.enable`) && this.running) {
      this.status.setState(completionsEnabled() ? 'ready' : 'disabled');
    }
    // Changing the model or backend reloads the engine: show "starting" until the new one answers.
    const reloads = [
      'model', 'backend', 'dtype', 'threads', 'kvCacheMb', 'engineUrl', 'engineDialect', 'engineModel', 'engineFimTemplate',
      'engineFallback', 'chatEngine', 'chatModel', 'chatEngineUrl', 'chatEngineDialect', 'chatEngineModel', 'chatEngineFimTemplate',
    ].some((name) =>
      e.affectsConfiguration(`${SECTION}.${name}`),
    );
    const client = this.running;
    if (!client) {
      return;
    }
    void client.sendNotification('workspace/didChangeConfiguration', {
      settings: { [SECTION]: this.settingsToSend() },
    }).then(() => {
      if (reloads) {
        this.status.setState('starting', 'loading the model');
        void this.waitForModel(client);
      }
    });
  }

  private settingsToSend(): Record<string, unknown> {
    const { options, userSet } = serverSettings(this.optionNames, this.sentOptions);
    this.sentOptions = userSet;
    return options;
  }

  private async showNotFound(message: string): Promise<void> {
    const setPath = 'Set waferline.server.path';
    const howTo = 'How to install';
    const choice = await vscode.window.showErrorMessage(
      `${message} Fix: install waferline into the workspace's .venv (\`.venv/bin/pip install -e /path/to/waferline\`), ` +
        'or set waferline.server.path to the waferline executable or a Python that has it, then run "waferline: Restart the server".',
      setPath,
      howTo,
    );
    if (choice === setPath) {
      await vscode.commands.executeCommand('workbench.action.openSettings', `${SECTION}.server.path`);
    } else if (choice === howTo) {
      await vscode.commands.executeCommand('extension.open', this.context.extension.id);
    }
  }

  dispose(): void {
    for (const d of this.disposables) {
      d.dispose();
    }
    void this.stop();
  }
}

/** The rewrite code action's instruction, from an input box (undefined when the user cancels). */
async function askInstruction(): Promise<string | undefined> {
  return vscode.window.showInputBox({
    title: 'waferline: rewrite the selection as instructed',
    prompt: 'An instruction-following model rewrites the code as you say.',
    placeHolder: 'Use a list comprehension',
    ignoreFocusOut: true,
  });
}
