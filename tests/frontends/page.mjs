// What the page drivers (browser_drive.mjs, widgets_drive.mjs) share: the
// headless Chromium they start (Debian's /usr/bin/chromium through
// playwright-core), the kernel messages the page sees, and opening a
// notebook in the classic Notebook until its kernel is idle.

import { chromium } from 'playwright-core';

// A persistent context in cfg.profile and its page; page errors go to `log`.
export async function launchPage(cfg, viewport, stepMs, log) {
  const ctx = await chromium.launchPersistentContext(cfg.profile, {
    executablePath: cfg.chromium || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync',
           '--disable-dev-shm-usage'],
    viewport,
    timeout: 30000,
  });
  const page = ctx.pages()[0] || await ctx.newPage();
  page.setDefaultTimeout(stepMs);
  page.on('pageerror', (e) => log(`pageerror: ${e.message}`));
  return { ctx, page };
}

// Counts of the kernel messages the page receives ("channel:msg_type", and
// "binary" for binary websocket frames), filled in as they come.
export function watchKernelMessages(page) {
  const seen = {};
  page.on('websocket', (ws) => {
    ws.on('framereceived', (f) => {
      if (typeof f.payload !== 'string') { seen['binary'] = (seen['binary'] || 0) + 1; return; }
      try {
        const m = JSON.parse(f.payload);
        const t = `${m.channel}:${m.header && m.header.msg_type}`;
        seen[t] = (seen[t] || 0) + 1;
      } catch (_) { /* not JSON */ }
    });
  });
  return seen;
}

export async function kernelIdle(page, timeout) {
  await page.waitForSelector('#kernel_indicator_icon.kernel_idle_icon', { timeout, state: 'attached' });
}

// Opens cfg.notebook and waits until its kernel is connected and idle.
export async function openNotebook(page, cfg) {
  const url = `${cfg.url}/notebooks/${encodeURIComponent(cfg.notebook)}?token=${cfg.token}`;
  await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 30000 });
  await page.waitForFunction(() => window.Jupyter && Jupyter.notebook && Jupyter.notebook.kernel
                             && Jupyter.notebook.kernel.is_connected(), null, { timeout: 30000 });
  await kernelIdle(page, 30000);
}

// Runs the driver's main(), then: result.ok, a full-page screenshot at
// failShot when a step failed (and failShot is given), the browser closed,
// and the result printed as ONE JSON line on stdout (what the test reads).
// handles() gives the driver's { ctx, page } as they are by then.
export async function runDriver(main, result, log, handles, failShot) {
  try {
    await main();
  } catch (e) {
    result.steps.push({ name: 'driver', ok: false, detail: String(e && e.stack || e).slice(0, 2000) });
  } finally {
    const { ctx, page } = handles();
    result.ok = result.steps.length > 0 && result.steps.every((s) => s.ok);
    if (!result.ok && page && failShot) {
      try {
        await page.screenshot({ path: failShot, fullPage: true, timeout: 10000 });
        result.failure_screenshot = failShot;
      } catch (e) { log(`failure screenshot: ${e}`); }
    }
    try { if (ctx) await ctx.close(); } catch (e) { log(`close: ${e}`); }
    process.stdout.write(JSON.stringify(result) + '\n');
  }
}

// A step runner: step(name, fn) records { name, ok, detail, ms } in
// result.steps and says whether fn succeeded; on failure, failure() adds what
// the page showed (its fields are merged into the step).
export function makeStep(result, failure) {
  return async function step(name, fn) {
    const t0 = Date.now();
    try {
      const detail = await fn();
      result.steps.push({ name, ok: true, detail: detail ?? null, ms: Date.now() - t0 });
      return true;
    } catch (e) {
      let extra = {};
      try { extra = await failure(); } catch (_) { /* page gone */ }
      result.steps.push({ name, ok: false, detail: String(e && e.message || e).slice(0, 2000),
                          ...extra, ms: Date.now() - t0 });
      return false;
    }
  };
}
