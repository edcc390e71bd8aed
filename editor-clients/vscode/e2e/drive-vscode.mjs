// Drives a real VS Code (code-server in headless Chromium, through playwright-core) the way a user would: open a
// file, type, wait for waferline's ghost text, accept it with Tab, save; read the status bar; hover a name; ask a
// question from the command palette. Prints one JSON line with what it saw; tests/e2e/test_vscode.py starts
// code-server, runs this and checks the saved file against the ghost text that was shown.
//
// usage: node drive-vscode.mjs '{"url": ..., "file": "sample.py", "type": "    return", "hoverWord": "add",
//                                "question": "...", "screenshots": "/dir", "chromium": "/usr/bin/chromium"}'
import { openFileWhenReady, openWorkbench, readGhost, runCommand } from './workbench.mjs';

const args = JSON.parse(process.argv[2]);
const timeout = args.timeoutMs ?? 90_000;
const result = { steps: [] };
const t0 = Date.now();

function step(name) {
  result.steps.push({ name, ms: Date.now() - t0 });
  process.stderr.write(`[drive-vscode] ${((Date.now() - t0) / 1000).toFixed(1)} s ${name}\n`);
}

const { browser, page } = await openWorkbench(args, timeout);
try {
  step('workbench loaded');
  const status = page.locator('.statusbar-item', { hasText: 'waferline' }).first();
  result.statusReady = await openFileWhenReady(page, args.file, timeout);
  step('server ready: ' + result.statusReady);

  await page.click('.monaco-editor .view-lines');
  await page.keyboard.press('Control+End');
  await page.keyboard.type(args.type, { delay: 40 });
  // A model may have nothing to say at one place (an empty answer, or one the server's syntax check refused): as a
  // person would, ask again explicitly ("Trigger Inline Suggestion" from the palette), then type on.
  result.typed = args.type;
  const more = ['v', 'a', 'l', 'u', 'e'];
  for (let attempt = 0; ; attempt++) {
    const shown = await page.waitForFunction(readGhost, null, { timeout: 10_000 }).then(() => true, () => false);
    if (shown) {
      break;
    }
    if (attempt >= 2 * more.length) {
      throw new Error(`no ghost text after typing ${JSON.stringify(result.typed)} and asking ${attempt} times`);
    }
    if (attempt % 2 === 0) {
      step('no ghost text yet: triggering the inline suggestion');
      await runCommand(page, 'Trigger Inline Suggestion', timeout);
    } else {
      const key = more[(attempt - 1) / 2];
      step(`no ghost text yet: typing ${key}`);
      await page.keyboard.type(key);
      result.typed += key;
    }
  }
  await page.waitForTimeout(300); // let a streaming suggestion settle before reading it
  result.ghost = await page.evaluate(readGhost);
  step('ghost text shown');
  await page.screenshot({ path: `${args.screenshots}/vscode-ghost-text.png` });

  await page.keyboard.press('Tab');
  await page.waitForFunction(() => !document.querySelector('.view-lines .ghost-text-decoration'), null, { timeout });
  await page.keyboard.press('Control+S');
  await page.waitForFunction(() => !document.querySelector('.tab.dirty'), null, { timeout });
  step('accepted and saved');
  await page.waitForFunction(() => /\d+ ms/.test(
    Array.from(document.querySelectorAll('.statusbar-item')).find((e) => e.textContent?.includes('waferline'))?.textContent ?? ''), null, { timeout });
  result.statusAfter = (await status.innerText()).trim();
  step('status: ' + result.statusAfter);

  if (args.hoverWord) {
    const word = page.locator('.view-lines .view-line span', { hasText: args.hoverWord }).first();
    await word.hover();
    const hover = page.locator('.monaco-hover-content, .monaco-hover .hover-contents').first();
    result.hover = await hover.waitFor({ timeout: 30_000 }).then(() => hover.innerText(), () => null);
    step('hover: ' + (result.hover ? 'shown' : 'none'));
    await page.keyboard.press('Escape');
  }

  if (args.question) {
    await runCommand(page, 'waferline: Ask a question', timeout);
    await page.waitForSelector('.quick-input-title:has-text("ask a question about the repository")', { timeout });
    await page.keyboard.type(args.question);
    await page.keyboard.press('Enter');
    // Either the answer's Markdown preview opens, or a notification says why not.
    const preview = page.locator('.tab', { hasText: 'Preview' }).first();
    const toast = page.locator('.notification-toast', { hasText: /cannot answer questions|question failed/ }).first();
    await Promise.race([preview.waitFor({ timeout }), toast.waitFor({ timeout })]);
    if (await preview.isVisible()) {
      const frame = page.frameLocator('iframe.webview.ready').frameLocator('iframe#active-frame');
      // The preview renders after its tab appears: wait for the quoted question, which heads every answer.
      await frame.locator('blockquote', { hasText: args.question }).waitFor({ timeout });
      result.answer = await frame.locator('body').innerText({ timeout });
      await page.screenshot({ path: `${args.screenshots}/vscode-ask.png` });
    } else {
      result.askMessage = await toast.innerText();
    }
    step('asked');
  }

  if (args.commands) {
    // Statistics open as a Markdown preview (the only one, once the answer's is closed); disable/enable flip the
    // status bar item's icon.
    await runCommand(page, 'View: Close All Editors', timeout);
    await page.waitForFunction(() => !document.querySelector('iframe.webview'), null, { timeout });
    await runCommand(page, 'waferline: Show statistics', timeout);
    await page.locator('.tab', { hasText: 'statistics' }).first().waitFor({ timeout });
    const stats = page.frameLocator('iframe.webview.ready').frameLocator('iframe#active-frame');
    await stats.locator('table').waitFor({ timeout });
    result.stats = await stats.locator('body').innerText({ timeout });
    await runCommand(page, 'waferline: Disable completions', timeout);
    await page.waitForSelector('.statusbar-item .codicon-circle-slash', { timeout });
    result.disabledStatus = true;
    await runCommand(page, 'waferline: Enable completions', timeout);
    await page.waitForSelector('.statusbar-item .codicon-sparkle', { timeout });
    result.enabledStatus = true;
    step('statistics, disable, enable');
    // Restart: the item spins while the new server loads its model, then shows ready again.
    await runCommand(page, 'waferline: Restart the server', timeout);
    await page.waitForSelector('.statusbar-item .codicon-loading', { timeout });
    await page.waitForSelector('.statusbar-item .codicon-sparkle', { timeout });
    result.restarted = true;
    step('restarted');
  }

  if (args.badServerPath) {
    // A server path that does not exist, typed into the Settings editor: the extension restarts on the change and
    // says what is wrong and how to fix it; the old path brings the server back.
    await runCommand(page, 'Preferences: Open User Settings', timeout);
    await page.waitForSelector('.settings-editor', { timeout });
    await page.keyboard.type('waferline.server.path');
    const input = page.locator('.setting-item-contents', { hasText: 'Server: Path' }).locator('input').first();
    await input.waitFor({ timeout });
    const original = await input.inputValue();
    await input.fill(args.badServerPath);
    await input.press('Tab');
    const toast = page.locator('.notification-toast', { hasText: 'not an executable file' }).first();
    await toast.waitFor({ timeout });
    result.notFound = await toast.innerText();
    await page.screenshot({ path: `${args.screenshots}/vscode-not-found.png` });
    await input.fill(original);
    await input.press('Tab');
    await page.waitForSelector('.statusbar-item .codicon-sparkle', { timeout });
    step('server not found, then found again');
  }
} catch (e) {
  result.error = String(e);
  await page.screenshot({ path: `${args.screenshots}/vscode-failure.png` }).catch(() => {});
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(result) + '\n');
process.exit(result.error ? 1 : 0);
