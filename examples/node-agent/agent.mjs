// agent.mjs - a Node.js agent that uses a cellblock kernel as its code
// interpreter, through Jupyter Server's REST + WebSocket kernel API with
// token auth (@jupyterlab/services, the client JupyterLab itself uses).
//
//   JUPYTER_URL=http://127.0.0.1:8888 JUPYTER_TOKEN=... node agent.mjs [OUTDIR]
//
// Steps, each printed as one line starting with "== ":
//   start     POST /api/kernels {"name": "cellblock"}, then the channels WebSocket
//   banner    kernel_info after a first cell: which isolation is in force
//   run       a cell that writes a chart (PNG) and a CSV; the files come back as
//             display_data with metadata.cellblock.artifact (path, size, sha256):
//             the agent checks each sha256 and saves the exact bytes in OUTDIR
//   error     a cell that raises: the agent reads ename/evalue
//   interrupt a cell that never ends, interrupted through the REST API
//   restart   the kernel restarted: the sandbox is new, the variables gone
//   shutdown  DELETE /api/kernels/{id}
// Exit status 0 when every step behaved as expected, 1 otherwise.
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, basename } from 'node:path';
import { KernelManager, KernelSpecAPI, ServerConnection } from '@jupyterlab/services';
import WebSocket from 'ws';

const BASE_URL = process.env.JUPYTER_URL || 'http://127.0.0.1:8888';
const TOKEN = process.env.JUPYTER_TOKEN || '';
const KERNEL = process.env.CELLBLOCK_KERNEL || 'cellblock';
const OUTDIR = process.argv[2] || 'agent-out';
const STEP_TIMEOUT_MS = 120000; // one step, sandbox start included
const INTERRUPT_AFTER_MS = 1000; // let the endless cell get going first

const serverSettings = ServerConnection.makeSettings({
  baseUrl: BASE_URL,
  wsUrl: BASE_URL.replace(/^http/, 'ws'),
  token: TOKEN,
  // Node has no WebSocket before 22: use the `ws` package (browsers: omit this)
  WebSocket,
  appendToken: true,
});

function step(name, detail) {
  console.log(`== ${name}: ${detail}`);
}

function withTimeout(promise, what) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer in ${STEP_TIMEOUT_MS} ms`)),
      STEP_TIMEOUT_MS);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

// Runs one cell; returns {reply, stdout, stderr, results, errors, artifacts}.
async function run(kernel, code) {
  const out = { stdout: '', stderr: '', results: [], errors: [], artifacts: [], displays: [] };
  const future = kernel.requestExecute({ code, stop_on_error: false });
  future.onIOPub = (msg) => {
    const t = msg.header.msg_type;
    const c = msg.content;
    if (t === 'stream') out[c.name === 'stderr' ? 'stderr' : 'stdout'] += c.text;
    else if (t === 'execute_result') out.results.push(c.data);
    else if (t === 'error') out.errors.push(c);
    else if (t === 'display_data') {
      const art = c.metadata && c.metadata.cellblock && c.metadata.cellblock.artifact;
      if (art) out.artifacts.push({ ...art, data: c.data });
      else out.displays.push(c.data);
    }
  };
  out.reply = (await withTimeout(future.done, 'execute')).content;
  return out;
}

// The bytes of an artifact, from its mime bundle: base64 for binary types,
// text for text types (application/json comes parsed).
function artifactBytes(art) {
  const value = art.data[art.mime];
  if (value === undefined) throw new Error(`${art.path}: no ${art.mime} in the bundle`);
  if (art.mime.startsWith('image/') && art.mime !== 'image/svg+xml') return Buffer.from(value, 'base64');
  if (art.mime === 'application/pdf' || art.mime === 'application/octet-stream')
    return Buffer.from(value, 'base64');
  if (art.mime === 'application/json' && typeof value !== 'string')
    throw new Error(`${art.path}: parsed JSON cannot be saved byte for byte`);
  return Buffer.from(value, 'utf8');
}

function saveArtifact(art) {
  const bytes = artifactBytes(art);
  const sha = createHash('sha256').update(bytes).digest('hex');
  if (sha !== art.sha256 || bytes.length !== art.size)
    throw new Error(`${art.path}: sha256/size mismatch (${sha}, ${bytes.length} B)`);
  const dest = join(OUTDIR, basename(art.path));
  writeFileSync(dest, bytes);
  return dest;
}

const CHART_CELL = `
import csv, matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = [(m, 100 + 17 * m % 40) for m in range(1, 13)]
with open("sales.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["month", "sales"]); w.writerows(rows)
plt.figure(figsize=(4, 3)); plt.bar([r[0] for r in rows], [r[1] for r in rows])
plt.title("sales per month"); plt.savefig("chart.png"); plt.close()
print("total", sum(r[1] for r in rows))
`;

async function main() {
  mkdirSync(OUTDIR, { recursive: true });
  const specs = await KernelSpecAPI.getSpecs(serverSettings);
  if (!specs.kernelspecs[KERNEL]) throw new Error(`no kernelspec ${KERNEL} on ${BASE_URL}`);
  const manager = new KernelManager({ serverSettings });
  const kernel = await withTimeout(manager.startNew({ name: KERNEL }), 'start');
  step('start', `kernel ${kernel.id} (${kernel.name})`);
  try {
    // the connection asks for kernel_info itself once its WebSocket is up; the banner
    // says which isolation is in force once the sandbox is up, i.e. after a first cell
    await withTimeout(kernel.info, 'kernel_info');
    await run(kernel, 'pass');
    const info = (await withTimeout(kernel.requestKernelInfo(), 'kernel_info')).content;
    step('banner', info.banner.split('\n').find((l) => l.startsWith('Sandbox')) || info.banner);

    const ex = await run(kernel, CHART_CELL);
    if (ex.reply.status !== 'ok') throw new Error(`chart cell failed: ${JSON.stringify(ex.errors)}`);
    step('run', `stdout ${JSON.stringify(ex.stdout.trim())}`);
    const names = ex.artifacts.map((a) => a.path).sort();
    if (names.join(',') !== 'chart.png,sales.csv')
      throw new Error(`expected chart.png and sales.csv back, got ${names}`);
    for (const art of ex.artifacts)
      step('artifact', `${art.path} ${art.mime} ${art.size} B sha256 ok -> ${saveArtifact(art)}`);

    const bad = await run(kernel, 'undefined_name + 1');
    if (bad.reply.status !== 'error' || bad.errors[0].ename !== 'NameError')
      throw new Error(`expected a NameError, got ${JSON.stringify(bad.reply)}`);
    step('error', `${bad.errors[0].ename}: ${bad.errors[0].evalue}`);

    await run(kernel, 'kept = 41');
    const endless = kernel.requestExecute({ code: 'import time\nwhile True: time.sleep(0.01)' });
    await new Promise((r) => setTimeout(r, INTERRUPT_AFTER_MS));
    await kernel.interrupt();
    const ireply = (await withTimeout(endless.done, 'interrupt')).content;
    if (ireply.status !== 'error' || ireply.ename !== 'KeyboardInterrupt')
      throw new Error(`interrupt: ${JSON.stringify(ireply)}`);
    const after = await run(kernel, 'kept + 1');
    const value = after.results.length ? after.results[0]['text/plain'] : '';
    if (value !== '42') throw new Error(`state lost by the interrupt: ${value}`);
    step('interrupt', `KeyboardInterrupt, then kept + 1 = ${value}`);

    await withTimeout(kernel.restart(), 'restart');
    const fresh = await run(kernel, "'kept' in globals()");
    const gone = fresh.results.length ? fresh.results[0]['text/plain'] : '';
    if (gone !== 'False') throw new Error(`restart kept the old state: ${gone}`);
    step('restart', `'kept' in globals() -> ${gone}`);
  } finally {
    await withTimeout(kernel.shutdown(), 'shutdown');
    manager.dispose();
  }
  step('shutdown', `kernel ${kernel.id} gone`);
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`agent failed: ${err && err.stack ? err.stack : err}`);
    process.exit(1);
  },
);
