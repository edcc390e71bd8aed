// Unit tests of finding `waferline serve` (run by tests/e2e/test_vscode.py with `node --test`; Node 24 strips the
// types itself). The rest of the extension needs VS Code and is tested end to end in code-server.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { resolveServerCommand } from '../src/serverCommand.ts';

function executable(file: string): string {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, '#!/bin/sh\n');
  fs.chmodSync(file, 0o755);
  return file;
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'waferline-server-command-'));
const project = path.join(tmp, 'project');
const venvScript = executable(path.join(project, '.venv', 'bin', 'waferline'));
const onPath = executable(path.join(tmp, 'bin', 'waferline'));
const python = executable(path.join(tmp, 'py', 'bin', 'python3.11'));
const noPath = { PATH: path.join(tmp, 'empty') };

void test('the setting wins, and a Python interpreter runs the module', () => {
  assert.deepEqual(resolveServerCommand(python, ['--model', 'tiny'], [project], noPath), {
    command: python,
    args: ['-m', 'waferline.cli', 'serve', '--model', 'tiny'],
    source: 'waferline.server.path (Python)',
  });
  const script = resolveServerCommand(onPath, [], [project], noPath);
  assert.ok(!(script instanceof Error));
  assert.deepEqual([script.command, script.args], [onPath, ['serve']]);
});

void test("then the workspace's .venv, then PATH", () => {
  const venv = resolveServerCommand('', [], [path.join(tmp, 'elsewhere'), project], { PATH: path.dirname(onPath) });
  assert.ok(!(venv instanceof Error));
  assert.equal(venv.command, venvScript);
  const fromPath = resolveServerCommand('', [], [tmp], { PATH: path.dirname(onPath) });
  assert.ok(!(fromPath instanceof Error));
  assert.equal(fromPath.command, onPath);
});

void test('nothing found, or a bad setting, is an error that says what was tried', () => {
  const none = resolveServerCommand('', [], [tmp], noPath);
  assert.ok(none instanceof Error);
  assert.match(none.message, /waferline\.server\.path is empty.*\.venv\/bin\/waferline.*not on PATH/);
  const bad = resolveServerCommand(path.join(tmp, 'missing'), [], [project], noPath);
  assert.ok(bad instanceof Error);
  assert.match(bad.message, /not an executable file/);
});
