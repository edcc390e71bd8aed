// Drives a real VS Code (code-server in headless Chromium) through next-edit suggestions and partial accept, as a
// user would: rename a parameter in its signature, see the edit proposed at a use below (the status item, the old
// text struck through, the diff in its hover), Tab to jump, Tab to accept, the next use of the chain the same way,
// save; rename again and Escape the proposal, a third time and move away; then keep a suggestion word by word, line by line and whole;
// then add a parameter to a signature, see the insertion its call lacks proposed there, Tab to jump: the insertion at
// the cursor is ghost text now (nothing struck through), which Tab accepts. Prints one JSON line with what it saw; tests/e2e/test_vscode.py checks the saved
// files and the server's counters.
//
// usage: node drive-next-edit.mjs '{"url": ..., "file": "rename.py", "renameAt": "1:19", "awayAt": "5:1",
//                                   "partialFile": "area.py",
//                                   "ghostFile": "calls.py", "paramAt": "1:14", "param": ", unit", "argAt": "6:20",
//                                   "screenshots": "/dir", "chromium": "/usr/bin/chromium"}'
import { openFileWhenReady, openWorkbench, readGhost, runCommand } from './workbench.mjs';

const args = JSON.parse(process.argv[2]);
const timeout = args.timeoutMs ?? 90_000;
const result = { steps: [] };
const t0 = Date.now();

function step(name) {
  result.steps.push({ name, ms: Date.now() - t0 });
  process.stderr.write(`[drive-next-edit] ${((Date.now() - t0) / 1000).toFixed(1)} s ${name}\n`);
}

const nextEditItem = (page) => page.locator('.statusbar-item', { hasText: 'next edit' }).first();
const cursor = async (page) => (await page.locator('.statusbar-item', { hasText: /Ln \d+, Col \d+/ }).first().innerText()).trim();

async function goTo(page, where) {
  await page.keyboard.press('Control+G');
  await page.waitForSelector('.quick-input-widget input:focus', { timeout });
  await page.keyboard.type(where);
  await page.keyboard.press('Enter');
  await page.waitForFunction((w) => document.body.innerText.includes(`Ln ${w.split(':')[0]}, Col ${w.split(':')[1]}`),
    where, { timeout }); // prettier-ignore
}

/** The words drawn struck through (the old text of a shown next edit). */
function struckThrough() {
  return Array.from(document.querySelectorAll('.view-lines span'))
    .filter((s) => s.children.length === 0 && getComputedStyle(s).textDecorationLine.includes('line-through'))
    .map((s) => s.textContent);
}

/** What is drawn struck through once the editor has rendered a change of the shown edit: the status item goes first
 * and the editor's decorations follow on its next frame, so it is read after up to 3 s for them to come (`drawn`:
 * something struck through) or to go (nothing); what is on screen then is reported as found, right or wrong. */
async function struckOnceSettled(page, drawn = false) {
  await page.waitForFunction(`(${struckThrough.toString()})().length ${drawn ? '>' : '==='} 0`, null,
    { timeout: 3000 }).catch(() => {}); // prettier-ignore
  return page.evaluate(struckThrough);
}

/** Type `text` over the word at `where` (line:column), as a user renaming it would. */
async function renameAt(page, where, text) {
  await goTo(page, where);
  await page.keyboard.press('Control+Shift+ArrowRight');
  await page.keyboard.type(text, { delay: 60 });
}

/** The ghost text once it differs from `before` (what a partial accept left on screen). */
async function ghostOtherThan(page, before) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const now = await page.evaluate(readGhost);
    if (JSON.stringify(now) !== JSON.stringify(before)) {
      return now;
    }
    if (Date.now() > deadline) {
      throw new Error(`the ghost text stayed ${JSON.stringify(before)}`);
    }
    await page.waitForTimeout(50);
  }
}

/** Tab, once no ghost text competes for it (a model suggestion takes Tab first, as it should). */
async function tab(page) {
  if (await page.evaluate(readGhost)) {
    result.ghostInTheWay = (result.ghostInTheWay ?? 0) + 1;
    await page.keyboard.press('Escape');
  }
  await page.keyboard.press('Tab');
}

const { browser, page } = await openWorkbench(args, timeout);
try {
  step('workbench loaded');
  result.statusReady = await openFileWhenReady(page, args.file, timeout);
  step('server ready: ' + result.statusReady);
  await page.click('.monaco-editor .view-lines');

  // A parameter renamed in the signature: the first use below is proposed.
  await renameAt(page, args.renameAt, 'by');
  await nextEditItem(page).waitFor({ timeout });
  result.first = (await nextEditItem(page).innerText()).trim();
  result.struck = await struckOnceSettled(page, true); // a status item shown a frame before its decorations
  step('next edit shown: ' + result.first);
  const box = await page.evaluate(() => {
    const span = Array.from(document.querySelectorAll('.view-lines span')).find(
      (s) => s.children.length === 0 && getComputedStyle(s).textDecorationLine.includes('line-through'));
    const r = span?.getBoundingClientRect();
    return r ? { x: r.x + r.width / 2, y: r.y + r.height / 2 } : null;
  });
  if (box) {
    // Monaco shows a hover only once the pointer rests on the text; on a loaded machine the first rest can be
    // missed (the hover provider still busy), so the pointer leaves and comes back, up to three times.
    const hover = page.locator('.monaco-hover', { hasText: 'next edit' }).first();
    result.hover = null;
    for (let attempt = 0; attempt < 3 && result.hover === null; attempt++) {
      await page.mouse.move(5, 700);
      await page.waitForTimeout(200);
      await page.mouse.move(box.x, box.y);
      await page.mouse.move(box.x + 1, box.y);
      result.hover = await hover.waitFor({ timeout: 6_000 }).then(() => hover.innerText(), () => null);
    }
  }
  await page.screenshot({ path: `${args.screenshots}/vscode-next-edit.png` });
  await page.mouse.move(5, 700);
  await page.waitForTimeout(300);

  await tab(page); // jump
  await page.waitForFunction(() => document.body.innerText.includes('Tab to accept'), null, { timeout });
  result.afterJump = { status: (await nextEditItem(page).innerText()).trim(), cursor: await cursor(page) };
  step('jumped: ' + result.afterJump.cursor);
  await tab(page); // accept
  await page.waitForFunction(() => /next edit: line 4/.test(document.body.innerText), null, { timeout });
  result.second = (await nextEditItem(page).innerText()).trim();
  step('the chain goes on: ' + result.second);
  await tab(page);
  await page.waitForFunction(() => document.body.innerText.includes('Tab to accept'), null, { timeout });
  await tab(page);
  await page.waitForFunction(() => !document.body.innerText.includes('next edit:'), null, { timeout });
  await page.keyboard.press('Control+S');
  await page.waitForFunction(() => !document.querySelector('.tab.dirty'), null, { timeout });
  step('renamed and saved');

  // Renamed again after a pause (the server's history takes edits within a second as one), and this time the
  // proposal is dismissed.
  await page.waitForTimeout(1500);
  await renameAt(page, args.renameAt, 'n');
  step('renamed again');
  await page.waitForFunction(() => /next edit: line 3/.test(document.body.innerText), null, { timeout });
  // Escape hides what is innermost first: a suggestion (ghost text) the server wrote meanwhile, then the next edit.
  // The ghost text may appear between reading it and the key press, so a press that finds none may still have
  // hidden one: three presses at most, the first two allowed to have hidden a suggestion.
  for (let i = 0; ; i++) {
    await page.keyboard.press('Escape');
    const gone = await page.waitForFunction(() => !document.body.innerText.includes('next edit:'), null, { timeout: 3000 })
      .then(() => true, () => false); // prettier-ignore
    if (gone) {
      break;
    }
    if (i >= 2) {
      throw new Error('Escape did not dismiss the next edit');
    }
    result.ghostInTheWay = (result.ghostInTheWay ?? 0) + 1;
  }
  result.dismissedStruck = await struckOnceSettled(page);
  step('dismissed');

  // A third time, and the cursor goes elsewhere (the file's last line): the proposal is dropped.
  await page.waitForTimeout(1500);
  await renameAt(page, args.renameAt, 'm');
  await page.waitForFunction(() => /next edit: line 3/.test(document.body.innerText), null, { timeout });
  await goTo(page, args.awayAt);
  await page.waitForFunction(() => !document.body.innerText.includes('next edit:'), null, { timeout });
  result.movedAwayStruck = await struckOnceSettled(page);
  await page.keyboard.press('Control+S');
  await page.waitForFunction(() => !document.querySelector('.tab.dirty'), null, { timeout });
  step('moved away and saved');

  if (args.partialFile) {
    // Keep the suggestion a word at a time (Ctrl+Right), the rest with Tab; on the next line, the line at once.
    await page.getByRole('treeitem', { name: args.partialFile }).click();
    await page.waitForFunction((f) => document.querySelector('.tab.active')?.textContent?.includes(f), args.partialFile,
      { timeout }); // prettier-ignore
    await page.click('.monaco-editor .view-lines');
    await page.keyboard.press('Control+End');
    await page.keyboard.press('ArrowUp');
    await page.keyboard.press('End');
    await page.keyboard.press('Backspace');
    await page.keyboard.type(' ', { delay: 40 }); // typing asks for a suggestion
    const ghosts = [];
    await page.waitForFunction(readGhost, null, { timeout });
    ghosts.push(await page.evaluate(readGhost));
    await page.keyboard.press('Control+ArrowRight');
    ghosts.push(await ghostOtherThan(page, ghosts[0]));
    await page.keyboard.press('Tab');
    await page.waitForFunction(() => !document.querySelector('.view-lines .ghost-text-decoration'), null, { timeout });
    await page.keyboard.press('End');
    await page.keyboard.press('Enter');
    await page.waitForFunction(readGhost, null, { timeout });
    ghosts.push(await page.evaluate(readGhost));
    await page.keyboard.press('Control+Alt+ArrowRight');
    await page.waitForFunction(() => !document.querySelector('.view-lines .ghost-text-decoration'), null, { timeout });
    result.ghosts = ghosts;
    await page.keyboard.press('Control+S');
    await page.waitForFunction(() => !document.querySelector('.tab.dirty'), null, { timeout });
    step('partial accepts saved');
  }

  if (args.ghostFile) {
    // A parameter added to a signature: its call below lacks the argument, an insertion there (drawn at the call,
    // away from the cursor). Tab jumps to where the argument goes, and the insertion, at the cursor now, turns into
    // ghost text (no status item, nothing struck through); the next Tab accepts it as any suggestion.
    await page.getByRole('treeitem', { name: args.ghostFile }).click();
    await page.waitForFunction((f) => document.querySelector('.tab.active')?.textContent?.includes(f), args.ghostFile,
      { timeout }); // prettier-ignore
    await page.click('.monaco-editor .view-lines');
    await goTo(page, args.paramAt);
    await page.keyboard.type(args.param, { delay: 60 });
    const argLine = args.argAt.split(':')[0];
    await page.waitForFunction((l) => document.body.innerText.includes(`next edit: line ${l}`), argLine, { timeout });
    result.insertionAway = (await nextEditItem(page).innerText()).trim();
    step('the insertion proposed at the call: ' + result.insertionAway);
    await tab(page); // jump
    const deadline = Date.now() + timeout;
    while ((await page.evaluate(readGhost))?.inline !== args.param) {
      if (Date.now() > deadline) {
        throw new Error(`no ghost text ${JSON.stringify(args.param)}: ${JSON.stringify(await page.evaluate(readGhost))}`);
      }
      await page.waitForTimeout(50);
    }
    result.insertionGhost = await page.evaluate(readGhost);
    result.insertionStatus = await page.evaluate(() => document.body.innerText.includes('next edit:'));
    result.insertionStruck = await page.evaluate(struckThrough);
    result.insertionCursor = await cursor(page);
    await page.screenshot({ path: `${args.screenshots}/vscode-next-edit-ghost.png` });
    step('the insertion at the cursor is ghost text');
    await page.keyboard.press('Tab');
    await page.waitForFunction((p) => !document.querySelector('.view-lines .ghost-text-decoration')?.textContent
      ?.replace(/\u00a0/g, ' ').startsWith(p), args.param, { timeout }); // prettier-ignore
    await page.keyboard.press('Control+S');
    await page.waitForFunction(() => !document.querySelector('.tab.dirty'), null, { timeout });
    step('the ghost text accepted and saved');
  }

  await runCommand(page, 'View: Close All Editors', timeout);
  await runCommand(page, 'waferline: Show statistics', timeout);
  await page.locator('.tab', { hasText: 'statistics' }).first().waitFor({ timeout });
  const stats = page.frameLocator('iframe.webview.ready').frameLocator('iframe#active-frame');
  await stats.locator('table').waitFor({ timeout });
  result.stats = await stats.locator('body').innerText({ timeout });
  step('statistics read');
} catch (e) {
  result.error = String(e);
  result.statusBar = await page.evaluate(() => Array.from(document.querySelectorAll('.statusbar-item')).map((i) => i.textContent))
    .catch(() => null);
  await page.screenshot({ path: `${args.screenshots}/vscode-failure.png` }).catch(() => {});
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(result) + '\n');
process.exit(result.error ? 1 : 0);
