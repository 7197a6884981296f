// Drives the classic Jupyter Notebook UI in headless Chromium (Debian's
// /usr/bin/chromium through playwright-core; no browser is ever downloaded).
// Used by test_browser.py:
//
//   node browser_drive.mjs '{"url": "http://127.0.0.1:PORT", "token": "...",
//        "notebook": "name.ipynb", "screenshot": "out.png", "profile": "/tmp/dir",
//        "chromium": "/usr/bin/chromium"}'
//
// Opens the notebook (already created on the cellblock kernel), types and runs
// cells the way a user does (keyboard, Shift+Enter, the interrupt button, the
// input() box) and prints ONE JSON object on stdout:
//   {"ok": bool, "kernel": ..., "steps": [{"name", "ok", "detail", "ms"}], "log": [...]}
// The caller asserts on it.  Every wait is bounded; the browser is always closed.

import {
  kernelIdle as idleOf, launchPage, makeStep, openNotebook, runDriver, watchKernelMessages,
} from './page.mjs';

const cfg = JSON.parse(process.argv[2]);
const STEP_MS = cfg.step_ms || 20000;
const result = { ok: false, kernel: null, steps: [], log: [] };
const log = (s) => { if (result.log.length < 200) result.log.push(String(s).slice(0, 500)); };

let ctx = null;
let page = null;

const step = makeStep(result, async () => ({ outputs: await lastRunOutputs() }));

// index of the cell we ran last (its outputs are what we check)
let current = -1;

async function lastRunOutputs() {
  return page.evaluate((i) => {
    const cells = document.querySelectorAll('#notebook-container > .cell');
    const c = cells[i];
    return c ? c.querySelector('.output_wrapper')?.innerText ?? '' : null;
  }, current);
}

function cellSel(i) {
  return `#notebook-container > .cell:nth-child(${i + 1})`;
}

// Put code into the last (empty) cell: short one-liners are typed on the
// keyboard; multi-line code is set through the notebook's own API (CodeMirror
// auto-indents typed lines, which would double the indentation).
async function enter(code) {
  // always the last cell (Shift+Enter on it appended a fresh one; clicking an
  // input() box may have selected an earlier cell)
  current = await page.evaluate(() => Jupyter.notebook.ncells() - 1);
  const last = await page.evaluate((i) => Jupyter.notebook.get_cell(i).get_text(), current);
  if (last !== '') throw new Error(`last cell is not empty: ${JSON.stringify(last)}`);
  const sel = cellSel(current);
  await page.click(`${sel} .CodeMirror`);
  if (!code.includes('\n')) {
    await page.keyboard.type(code, { delay: 5 });
  } else {
    await page.evaluate((c) => Jupyter.notebook.get_selected_cell().set_text(c), code);
  }
  const text = await page.evaluate((i) => Jupyter.notebook.get_cell(i).get_text(), current);
  if (text !== code) throw new Error(`cell text is ${JSON.stringify(text)}, wanted ${JSON.stringify(code)}`);
  return sel;
}

async function runCell(code) {
  const sel = await enter(code);
  await page.keyboard.press('Shift+Enter');
  return sel;
}

// wait until the cell is no longer running (prompt "In [n]:" with a number)
async function waitDone(sel, timeout = STEP_MS) {
  await page.waitForFunction((s) => {
    const p = document.querySelector(`${s} .input_prompt`);
    return p && /In\s*\[\d+\]/.test(p.innerText);
  }, sel, { timeout });
  return page.evaluate((s) => document.querySelector(`${s} .input_prompt`).innerText.trim(), sel);
}

async function outputText(sel, kind) {
  // kind (classic Notebook subarea classes): 'stdout' | 'stderr' | 'result' | 'error' | null (everything)
  return page.evaluate(([s, k]) => {
    const root = document.querySelector(`${s} .output`);
    if (!root) return '';
    const q = k ? `.output_subarea.output_${k}` : '.output_subarea';
    return Array.from(root.querySelectorAll(q)).map((e) => e.innerText).join('\n');
  }, [sel, kind]);
}

async function waitOutput(sel, kind, pattern, timeout = STEP_MS) {
  const rx = new RegExp(pattern);
  const t0 = Date.now();
  for (;;) {
    const text = await outputText(sel, kind);
    if (rx.test(text)) return text;
    if (Date.now() - t0 > timeout) {
      throw new Error(`no ${kind || 'output'} matching /${pattern}/ within ${timeout} ms; ` +
                      `outputs: ${JSON.stringify(await outputText(sel, null))}`);
    }
    await page.waitForTimeout(100);
  }
}

async function kernelIdle(timeout = STEP_MS) {
  await idleOf(page, timeout);
}

async function main() {
  ({ ctx, page } = await launchPage(cfg, { width: 1100, height: 1500 }, STEP_MS, log));
  page.on('console', (m) => { if (m.type() === 'error') log(`console.error: ${m.text()}`); });
  result.messages = watchKernelMessages(page);

  let ok = await step('open notebook, kernel idle', async () => {
    await openNotebook(page, cfg);
    result.kernel = await page.evaluate(() => ({
      name: Jupyter.notebook.kernel.name,
      display: document.querySelector('#kernel_indicator .kernel_indicator_name')?.innerText
               || document.querySelector('.kernel_indicator_name')?.innerText || null,
      banner: Jupyter.notebook.kernel.info_reply?.banner || null,
    }));
    if (result.kernel.name !== 'cellblock') throw new Error(`kernel is ${result.kernel.name}`);
    return result.kernel;
  });
  if (!ok) return;

  await step('print', async () => {
    const sel = await runCell('print("hello from", 6*7)');
    const prompt = await waitDone(sel);
    const out = await waitOutput(sel, 'stdout', '^hello from 42\\s*$');
    return { prompt, out };
  });

  await step('expression', async () => {
    const sel = await runCell('21*2');
    const prompt = await waitDone(sel);
    const out = await waitOutput(sel, 'result', '^42$');
    const outPrompt = await page.evaluate((s) => document.querySelector(`${s} .output_prompt`)?.innerText.trim(), sel);
    if (!/Out\[\d+\]/.test(outPrompt || '')) throw new Error(`output prompt ${outPrompt}`);
    return { prompt, out, outPrompt };
  });

  await step('matplotlib plot', async () => {
    const sel = await runCell([
      'import matplotlib.pyplot as plt',
      'fig, ax = plt.subplots(figsize=(4, 2.5))',
      'ax.plot([1, 3, 2, 4], marker="o")',
      'ax.set_title("cellblock plot")',
      'plt.show()',
    ].join('\n'));
    await waitDone(sel);
    const img = await page.waitForSelector(`${sel} .output_subarea img`, { timeout: STEP_MS });
    await page.waitForFunction((e) => e.complete && e.naturalWidth > 0, img, { timeout: STEP_MS });
    const info = await img.evaluate((e) => ({ src: e.src.slice(0, 22), w: e.naturalWidth, h: e.naturalHeight }));
    if (!info.src.startsWith('data:image/png')) throw new Error(`img src ${info.src}`);
    return info;
  });

  await step('DataFrame table', async () => {
    const sel = await runCell([
      'import pandas as pd',
      'pd.DataFrame({"city": ["Oslo", "Lisbon"], "temp": [3.5, 17.25]})',
    ].join('\n'));
    await waitDone(sel);
    const table = await page.waitForSelector(`${sel} .output_subarea table`, { timeout: STEP_MS });
    const text = await table.innerText();
    if (!/Lisbon/.test(text) || !/17\.25/.test(text)) throw new Error(`table text ${text}`);
    const rows = await table.evaluate((t) => t.querySelectorAll('tbody tr').length);
    if (rows !== 2) throw new Error(`${rows} rows`);
    return { rows, text };
  });

  await step('error traceback', async () => {
    const sel = await runCell('1/0');
    await waitDone(sel);
    const out = await waitOutput(sel, 'error', 'ZeroDivisionError');
    if (!/Traceback|<cell-|line 1/.test(out)) throw new Error(`no traceback in ${out}`);
    return out;
  });

  await step('input()', async () => {
    const sel = await runCell('name = input("your name? ")\nprint("hello,", name)');
    const box = await page.waitForSelector(`${sel} input.raw_input`, { timeout: STEP_MS });
    const prompt = await page.evaluate((s) => document.querySelector(`${s} .raw_input_prompt`)?.innerText, sel);
    if (!/your name\?/.test(prompt || '')) throw new Error(`input prompt ${prompt}`);
    await box.click();
    await page.keyboard.type('cellblock', { delay: 5 });
    await page.keyboard.press('Enter');
    await waitDone(sel);
    const out = await waitOutput(sel, 'stdout', 'hello, cellblock');
    return { prompt, out };
  });

  await step('infinite loop stopped by the interrupt button', async () => {
    const sel = await runCell('print("looping", flush=True)\nwhile True:\n    pass');
    await waitOutput(sel, 'stdout', 'looping');
    await page.waitForSelector('#kernel_indicator_icon.kernel_busy_icon', { timeout: STEP_MS, state: 'attached' });
    await page.waitForTimeout(800);
    const busyPrompt = await page.evaluate((s) => document.querySelector(`${s} .input_prompt`).innerText.trim(), sel);
    if (!/\[\*\]/.test(busyPrompt)) throw new Error(`cell not running: ${busyPrompt}`);
    const t0 = Date.now();
    await page.click('button[data-jupyter-action="jupyter-notebook:interrupt-kernel"]');
    const out = await waitOutput(sel, 'error', 'KeyboardInterrupt');
    await waitDone(sel);
    await kernelIdle();
    return { busyPrompt, out, interrupt_ms: Date.now() - t0 };
  });

  await step('a cell after the interrupt', async () => {
    const sel = await runCell('print("still alive", 2**10, name)');
    const prompt = await waitDone(sel);
    const out = await waitOutput(sel, 'stdout', '^still alive 1024 cellblock\\s*$');
    return { prompt, out };
  });

  await step('execution counts', async () => {
    const cells = await page.evaluate(() => Jupyter.notebook.get_cells()
      .map((c) => ({ type: c.cell_type, n: c.input_prompt_number ?? null,
                     code: c.get_text().split('\n')[0] })));
    return cells;
  });

  await step('screenshot', async () => {
    await page.evaluate(() => { Jupyter.notebook.select(0); window.scrollTo(0, 0); });
    await page.screenshot({ path: cfg.screenshot, fullPage: true });
    return cfg.screenshot;
  });
}

await runDriver(main, result, log, () => ({ ctx, page }),
                cfg.screenshot ? cfg.screenshot.replace(/\.png$/, '') + '-failed.png' : null);
