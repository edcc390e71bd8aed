// Finding `waferline serve`: the `waferline.server.path` setting (the `waferline` executable or a Python
// interpreter that has waferline installed), else the workspace's .venv, else PATH.
import * as fs from 'node:fs';
import * as path from 'node:path';

export interface ServerCommand {
  command: string;
  args: string[];
  source: string; // where it was found, for the output channel and error messages
}

const isWindows = process.platform === 'win32';

function isExecutable(file: string): boolean {
  try {
    const stat = fs.statSync(file);
    if (!stat.isFile()) {
      return false;
    }
    if (!isWindows) {
      fs.accessSync(file, fs.constants.X_OK);
    }
    return true;
  } catch {
    return false;
  }
}

function isPython(file: string): boolean {
  return /^python(\d+(\.\d+)*)?(\.exe)?$/i.test(path.basename(file));
}

function venvScript(folder: string): string {
  return isWindows ? path.join(folder, '.venv', 'Scripts', 'waferline.exe') : path.join(folder, '.venv', 'bin', 'waferline');
}

function onPath(env: NodeJS.ProcessEnv): string | undefined {
  const names = isWindows ? ['waferline.exe', 'waferline.cmd'] : ['waferline'];
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    for (const name of names) {
      const candidate = path.join(dir, name);
      if (dir && isExecutable(candidate)) {
        return candidate;
      }
    }
  }
  return undefined;
}

/** What to run, or an Error whose message says what was tried and how to fix it. */
export function resolveServerCommand(
  settingPath: string,
  extraArgs: string[],
  workspaceFolders: string[],
  env: NodeJS.ProcessEnv = process.env,
): ServerCommand | Error {
  const tail = ['serve', ...extraArgs];
  if (settingPath) {
    if (!isExecutable(settingPath)) {
      return new Error(`waferline.server.path is set to "${settingPath}", which is not an executable file.`);
    }
    if (isPython(settingPath)) {
      return { command: settingPath, args: ['-m', 'waferline.cli', ...tail], source: 'waferline.server.path (Python)' };
    }
    return { command: settingPath, args: tail, source: 'waferline.server.path' };
  }
  for (const folder of workspaceFolders) {
    const script = venvScript(folder);
    if (isExecutable(script)) {
      return { command: script, args: tail, source: `the workspace's .venv (${folder})` };
    }
  }
  const found = onPath(env);
  if (found) {
    return { command: found, args: tail, source: 'PATH' };
  }
  return new Error(
    'The waferline server was not found: waferline.server.path is empty, no workspace folder has ' +
      '.venv/bin/waferline, and `waferline` is not on PATH.',
  );
}
