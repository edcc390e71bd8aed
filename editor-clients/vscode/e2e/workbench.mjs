// What the end-to-end drivers share: a headless Chromium on code-server's workbench, opening a file of the
// workspace, waiting for the waferline server to be ready, running a palette command, reading the ghost text.
import { chromium } from 'playwright-core';

export async function openWorkbench(args, timeout) {
  const browser = await chromium.launch({
    executablePath: args.chromium,
    headless: true,
    // As root, and with no network beyond loopback: no sandbox, no background fetches.
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
  await page.goto(args.url);
  await page.waitForSelector('.monaco-workbench', { timeout });
  return { browser, page };
}

/** Open `file` from the explorer and wait until the server is up (the status item leaves its "starting" state). */
export async function openFileWhenReady(page, file, timeout) {
  const status = page.locator('.statusbar-item', { hasText: 'waferline' }).first();
  await status.waitFor({ timeout });
  await page.getByRole('treeitem', { name: file }).click();
  await page.waitForSelector('.monaco-editor .view-lines', { timeout });
  await page.waitForFunction(
    () => {
      const item = Array.from(document.querySelectorAll('.statusbar-item')).find((e) => e.textContent?.includes('waferline'));
      return item && !item.querySelector('.codicon-loading') && !item.querySelector('.codicon-error');
    },
    null,
    { timeout },
  );
  return (await status.innerText()).trim();
}

// Run a command from the palette (F1), typing only once the palette has the focus.
export async function runCommand(page, title, timeout) {
  await page.keyboard.press('F1');
  await page.waitForSelector('.quick-input-widget input:focus', { timeout });
  await page.keyboard.type(title);
  await page.waitForSelector('.quick-input-list .monaco-list-row', { timeout });
  await page.keyboard.press('Enter');
}

// Text of the ghost text on screen: the part inline on the cursor's line, and further lines in a view zone.
export function readGhost() {
  const text = (el) => (el.textContent ?? '').replace(/\u00a0/g, ' ');
  const inline = Array.from(document.querySelectorAll('.view-lines .ghost-text-decoration'))
    .map(text)
    .join('');
  const rest = Array.from(document.querySelectorAll('.ghost-text .view-line')).map(text);
  return inline || rest.length ? { inline, rest } : null;
}
