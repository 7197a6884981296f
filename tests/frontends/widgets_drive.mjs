// Drives ipywidgets in the classic Jupyter Notebook (Debian's jupyter-js-widgets
// nbextension) in headless Chromium (Debian's /usr/bin/chromium through
// playwright-core; no browser is downloaded).  Used by test_widgets_browser.py:
//
//   node widgets_drive.mjs '{"url": "http://127.0.0.1:PORT", "token": "...",
//        "notebook": "w.ipynb", "kernel": "cellblock", "shots": "/dir", "prefix": "widgets-cellblock",
//        "profile": "/tmp/dir", "chromium": "/usr/bin/chromium"}'
//
// The notebook (tests/frontends/widgets_notebook.py) already holds its cells;
// each is run the way a user does (click, Shift+Enter), and the widgets are
// used with the mouse and keyboard: a slider moved with the arrow keys, a
// button clicked.  Prints ONE JSON object on stdout:
//   {"ok": bool, "kernel": ..., "steps": [{"name", "ok", "detail", "ms"}], "log": [...]}
// Every wait is bounded; the browser is always closed.

import {
  kernelIdle as idleOf, launchPage, makeStep, openNotebook, runDriver, watchKernelMessages,
} from './page.mjs';

const cfg = JSON.parse(process.argv[2]);
const STEP_MS = cfg.step_ms || 30000;
const result = { ok: false, kernel: null, steps: [], log: [], shots: [] };
const log = (s) => { if (result.log.length < 300) result.log.push(String(s).slice(0, 500)); };

let ctx = null;
let page = null;
let current = -1;
const consoleLines = [];

function cellSel(i) {
  return `#notebook-container > .cell:nth-child(${i + 1})`;
}

async function cellText(i) {
  return page.evaluate((s) => document.querySelector(s)?.querySelector('.widget-area')?.innerText
                         + '\n' + (document.querySelector(`${s} > .output_wrapper`)?.innerText ?? ''),
                       cellSel(i));
}

const step = makeStep(result, async () => ({ cell: current >= 0 ? await cellText(current) : null }));

// Run cell i as a user does: click into it, Shift+Enter; wait until it is done.
async function runCell(i, timeout = STEP_MS) {
  current = i;
  const sel = cellSel(i);
  await page.click(`${sel} .CodeMirror`);
  await page.keyboard.press('Shift+Enter');
  await page.waitForFunction((s) => {
    const p = document.querySelector(`${s} .input_prompt`);
    return p && /In\s*\[\d+\]/.test(p.innerText);
  }, sel, { timeout });
  return sel;
}

async function waitText(i, pattern, where = 'any', timeout = STEP_MS) {
  const rx = new RegExp(pattern);
  const t0 = Date.now();
  for (;;) {
    const t = await page.evaluate(([s, w]) => {
      const c = document.querySelector(s);
      if (!c) return '';
      const area = c.querySelector('.widget-area')?.innerText ?? '';
      const out = c.querySelector(':scope > .output_wrapper')?.innerText ?? '';
      return w === 'widgets' ? area : w === 'output' ? out : area + '\n' + out;
    }, [cellSel(i), where]);
    if (rx.test(t)) return t;
    if (Date.now() - t0 > timeout) {
      throw new Error(`no ${where} text matching /${pattern}/ within ${timeout} ms; ` +
                      `cell shows: ${JSON.stringify(await cellText(i))}`);
    }
    await page.waitForTimeout(100);
  }
}

async function kernelIdle(timeout = STEP_MS) {
  await idleOf(page, timeout);
}

async function readout(i, nth = 0) {
  return page.evaluate(([s, n]) => {
    const r = document.querySelectorAll(`${s} .widget-area .widget-readout`)[n];
    return r ? (r.value ?? r.innerText ?? '').toString().trim() || r.innerText.trim() : null;
  }, [cellSel(i), nth]);
}

// Move the nth slider of cell i by `times` presses of ArrowRight on its handle.
async function nudgeSlider(i, times, nth = 0) {
  const handle = page.locator(`${cellSel(i)} .widget-area .ui-slider-handle`).nth(nth);
  await handle.waitFor({ state: 'visible', timeout: STEP_MS });
  await handle.focus();
  for (let k = 0; k < times; k++) {
    await page.keyboard.press('ArrowRight');
    await page.waitForTimeout(150);
  }
}

async function shot(name, i = null) {
  const path = `${cfg.shots}/${cfg.prefix}-${name}.png`;
  if (i === null) {
    await page.screenshot({ path, fullPage: true });
  } else {
    await page.locator(cellSel(i)).screenshot({ path });
  }
  result.shots.push(path);
  return path;
}

async function main() {
  ({ ctx, page } = await launchPage(cfg, { width: 1000, height: 1400 }, STEP_MS, log));
  page.on('console', (m) => {
    consoleLines.push(m.text());
    if (m.type() === 'error' || m.type() === 'warning') log(`console.${m.type()}: ${m.text()}`);
  });
  result.messages = watchKernelMessages(page);

  let ok = await step('open notebook, kernel idle, widget extension loaded', async () => {
    await openNotebook(page, cfg);
    await page.waitForFunction(() => window.require && require.defined
                               && require.defined('nbextensions/jupyter-js-widgets/extension'),
                               null, { timeout: 30000 });
    result.kernel = await page.evaluate(() => ({ name: Jupyter.notebook.kernel.name,
                                                 cells: Jupyter.notebook.ncells() }));
    if (result.kernel.name !== cfg.kernel) throw new Error(`kernel is ${result.kernel.name}`);
    return result.kernel;
  });
  if (!ok) return;

  ok = await step('imports', async () => {
    await runCell(0);
    const err = await page.evaluate((s) => document.querySelector(`${s} .output_error`)?.innerText, cellSel(0));
    if (err) throw new Error(err);
  });
  if (!ok) return;

  // The page checks the widget versions with the kernel when it connects,
  // which was before ipywidgets was imported (its comm target did not exist
  // yet): the kernel closed that comm, and ipywidgets now warns "Widget
  // Javascript not detected ... Reconnecting the current kernel may help".
  // Kernel > Reconnect, as the warning says: the check runs again, through a
  // comm the page opens and the kernel answers.
  await step('the widget version check, after Kernel > Reconnect', async () => {
    const before = consoleLines.length;
    await page.click('#kernellink');
    await page.click('#reconnect_kernel > a');
    const t0 = Date.now();
    for (;;) {
      const lines = consoleLines.slice(before);
      const hit = lines.find((l) => /Widget backend and frontend versions are (not )?compatible/.test(l));
      if (hit) {
        if (/not compatible/.test(hit)) throw new Error(hit);
        await kernelIdle();
        return hit;
      }
      if (Date.now() - t0 > STEP_MS) throw new Error(`no version check: ${JSON.stringify(lines.slice(-10))}`);
      await page.waitForTimeout(100);
    }
  });

  await step('an IntSlider renders', async () => {
    await runCell(1);
    await page.waitForSelector(`${cellSel(1)} .widget-area .widget-hslider`, { timeout: STEP_MS });
    await page.waitForSelector(`${cellSel(1)} .widget-area .ui-slider-handle`, { timeout: STEP_MS });
    const label = await page.evaluate((s) => document.querySelector(`${s} .widget-area .widget-label`)?.innerText, cellSel(1));
    const value = await readout(1);
    if (value !== '3') throw new Error(`readout ${value}`);
    return { label, value };
  });

  await step('moving the slider prints into the Output widget', async () => {
    await nudgeSlider(1, 2);
    const text = await waitText(1, 'slider moved to 5', 'widgets');
    // the print is in the Output widget, not in the cell's own output area
    const own = await page.evaluate((s) => document.querySelector(`${s} > .output_wrapper`)?.innerText ?? '', cellSel(1));
    if (/slider moved/.test(own)) throw new Error(`observer output landed in the cell's output area: ${own}`);
    const inWidget = await page.evaluate((s) => document.querySelector(`${s} .widget-area .output_wrapper`)?.innerText ?? '', cellSel(1));
    if (!/slider moved to 4\s+slider moved to 5/.test(inWidget)) throw new Error(`Output widget shows ${JSON.stringify(inWidget)}`);
    return { readout: await readout(1), text };
  });

  await step('interact renders, and renders again on change', async () => {
    await runCell(2);
    const first = await waitText(2, '4 squared is 16', 'widgets');
    await nudgeSlider(2, 1);
    const second = await waitText(2, '5 squared is 25', 'widgets');
    if (/4 squared is 16/.test(second)) throw new Error(`old output kept: ${second}`);
    return { first, second };
  });

  await step('a Button click runs its callback', async () => {
    await runCell(3);
    const button = page.locator(`${cellSel(3)} .widget-area button`, { hasText: 'Click me' });
    await button.waitFor({ state: 'visible', timeout: STEP_MS });
    await waitText(3, 'no clicks yet', 'widgets');
    await button.click();
    await waitText(3, 'clicked 1 time\\b', 'widgets');
    await button.click();
    return await waitText(3, 'clicked 2 times', 'widgets');
  });

  await step('a tqdm.notebook loop draws and completes its bar', async () => {
    await runCell(4, 60000);
    await page.waitForSelector(`${cellSel(4)} .widget-area .progress-bar-success`, { timeout: STEP_MS });
    const text = await waitText(4, '40/40', 'widgets');
    const width = await page.evaluate((s) => document.querySelector(`${s} .widget-area .progress-bar`)?.style.width, cellSel(4));
    if (width !== '100%') throw new Error(`bar width ${width}`);
    return { text, width };
  });

  await step('Python sees what the page did', async () => {
    await runCell(5);
    return await waitText(5, '^slider 5 \\| clicks 2\\s*$', 'output');
  });

  await step('an interactive matplotlib figure (%matplotlib notebook)', async () => {
    await runCell(6);
    const sel = cellSel(6);
    const canvas = page.locator(`${sel} canvas.mpl-canvas`);
    await canvas.waitFor({ state: 'visible', timeout: STEP_MS });
    // the figure arrives as PNG frames over the comm and is painted on the canvas
    const t0 = Date.now();
    let inked = 0;
    while (inked < 500) {
      inked = await canvas.evaluate((c) => {
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let k = 0; k < d.length; k += 4) if (d[k + 3] > 0 && (d[k] < 200 || d[k + 1] < 200 || d[k + 2] < 200)) n++;
        return n;
      });
      if (Date.now() - t0 > STEP_MS) throw new Error(`canvas has ${inked} inked pixels`);
      if (inked < 500) await page.waitForTimeout(200);
    }
    // moving the mouse over the axes: the kernel answers with the coordinates
    const box = await canvas.boundingBox();
    await page.mouse.move(box.x + box.width * 0.5, box.y + box.height * 0.5);
    await page.mouse.move(box.x + box.width * 0.55, box.y + box.height * 0.5);
    await page.waitForFunction((s) => /x=.*y=/.test(document.querySelector(`${s} .mpl-message`)?.innerText ?? ''),
                               sel, { timeout: STEP_MS });
    const status = await page.evaluate((s) => document.querySelector(`${s} .mpl-message`).innerText, sel);
    await shot('figure', 6);
    return { inked, status };
  });

  await step('no cell warns about the widget Javascript', async () => {
    const text = await page.evaluate(() => document.querySelector('#notebook-container').innerText);
    if (/Widget Javascript not detected/.test(text)) throw new Error('a cell says: Widget Javascript not detected');
  });

  await step('screenshots', async () => {
    await kernelIdle();
    await page.evaluate(() => { Jupyter.notebook.select(0); window.scrollTo(0, 0); document.activeElement?.blur(); });
    await shot('notebook');
    for (const i of [1, 2, 3, 4]) await shot(`cell${i}`, i);
    // the README's picture: the widget cells together
    const box = await page.evaluate(() => {
      const cells = document.querySelectorAll('#notebook-container > .cell');
      const a = cells[1].getBoundingClientRect(), b = cells[4].getBoundingClientRect();
      return { x: a.left, y: a.top + window.scrollY, width: Math.max(a.width, b.width), height: b.bottom - a.top };
    });
    const path = `${cfg.shots}/${cfg.prefix}.png`;
    await page.screenshot({ path, clip: box, fullPage: true });
    result.shots.push(path);
    return result.shots;
  });
}

await runDriver(main, result, log, () => ({ ctx, page }),
                cfg.shots ? `${cfg.shots}/${cfg.prefix}-failed.png` : null);
