// waferline for VS Code: starts `waferline serve` and shows its inline completions; see README.md.
import * as vscode from 'vscode';
import { WaferlineClient } from './client';
import { registerAskCommand, registerCommands } from './commands';
import { StatusBar } from './statusBar';

let waferline: WaferlineClient | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel('waferline', { log: true });
  const status = new StatusBar();
  waferline = new WaferlineClient(context, status, output);
  context.subscriptions.push(output, status, waferline);
  registerCommands(context, waferline);
  await waferline.start();
  const ask = registerAskCommand(waferline);
  if (ask) {
    context.subscriptions.push(ask);
  }
}

export async function deactivate(): Promise<void> {
  await waferline?.stop();
}
