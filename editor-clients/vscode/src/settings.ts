// The extension's settings, read in one place. Server options are every `waferline.*` setting this extension
// contributes except the client-only ones below; they are generated into package.json from the server's option
// declarations (server/options.py, `make options`) and sent to the server as initializationOptions and in
// workspace/didChangeConfiguration, nested under `waferline`.
import * as vscode from 'vscode';
import clientSettings from '../client-settings.json';

export const SECTION = 'waferline';

/**
 * Settings that configure the editor side only; the server never sees them. Declared in client-settings.json, which
 * the generator copies into package.json after the server options.
 */
export const CLIENT_ONLY = new Set(Object.keys(clientSettings).map((key) => key.slice(SECTION.length + 1)));

export interface ServerLaunchSettings {
  path: string;
  args: string[];
}

/** The server option names this extension contributes (from package.json), e.g. `maxTokens`. */
export function serverOptionNames(packageJSON: unknown): string[] {
  const pkg = packageJSON as { contributes?: { configuration?: { properties?: Record<string, unknown> } } };
  const properties = pkg.contributes?.configuration?.properties ?? {};
  return Object.keys(properties)
    .filter((key) => key.startsWith(SECTION + '.'))
    .map((key) => key.slice(SECTION.length + 1))
    .filter((name) => !CLIENT_ONLY.has(name));
}

/**
 * The options the server receives: only those the user set (user, workspace or folder settings), so that the
 * server's own defaults and its command-line flags (`waferline.server.args`) stay in force for the rest.
 * `previous` lists the names the user had set last time: one since removed is sent with its contributed default,
 * because the server keeps the last value of an option it is not sent. Returns the options and the names set now.
 */
export function serverSettings(
  names: string[],
  previous: ReadonlySet<string> = new Set(),
): { options: Record<string, unknown>; userSet: Set<string> } {
  const config = vscode.workspace.getConfiguration(SECTION);
  const options: Record<string, unknown> = {};
  const userSet = new Set<string>();
  for (const name of names) {
    const inspected = config.inspect(name);
    const value = inspected?.workspaceFolderValue ?? inspected?.workspaceValue ?? inspected?.globalValue;
    if (value !== undefined) {
      options[name] = value;
      userSet.add(name);
    } else if (previous.has(name)) {
      options[name] = inspected?.defaultValue ?? null;
    }
  }
  return { options, userSet };
}

export function launchSettings(): ServerLaunchSettings {
  const config = vscode.workspace.getConfiguration(SECTION);
  return {
    path: (config.get<string>('server.path') ?? '').trim(),
    args: config.get<string[]>('server.args') ?? [],
  };
}

export function completionsEnabled(): boolean {
  return vscode.workspace.getConfiguration(SECTION).get<boolean>('enable') ?? true;
}

export async function setCompletionsEnabled(enabled: boolean): Promise<void> {
  await vscode.workspace.getConfiguration(SECTION).update('enable', enabled, vscode.ConfigurationTarget.Global);
}
