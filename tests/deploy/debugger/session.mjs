// session.mjs - the debugger of a cellblock kernel driven as JupyterLab's
// debugger panel drives it, through Jupyter Server's REST + WebSocket API
// with @jupyterlab/services (the client JupyterLab itself uses):
//
//   JUPYTER_URL=http://127.0.0.1:8888 JUPYTER_TOKEN=... node session.mjs
//
// Every step prints one line "== name: detail" (JSON detail); any failure
// prints "!! ..." and exits 1.  tests/deploy/test_debugger_server.py checks
// the lines.  Each debug request waits for future.done, which
// @jupyterlab/services resolves once the debug_reply and the request's idle
// status have both arrived: a kernel that skips either hangs this script.
import { KernelManager, KernelSpecAPI, ServerConnection } from '@jupyterlab/services';
import WebSocket from 'ws';

const BASE_URL = process.env.JUPYTER_URL || 'http://127.0.0.1:8888';
const KERNEL = process.env.CELLBLOCK_KERNEL || 'cellblock';
const STEP_MS = 120000; // one step, the sandbox's start and debugpy's import included

const serverSettings = ServerConnection.makeSettings({
  baseUrl: BASE_URL,
  wsUrl: BASE_URL.replace(/^http/, 'ws'),
  token: process.env.JUPYTER_TOKEN || '',
  WebSocket, // Node has no WebSocket before 22
  appendToken: true,
});

const CELL = 'def f(a, b):\n    c = a + b\n    return c\n\nf(2, 3)';
let seq = 0;

function step(name, detail) {
  console.log(`== ${name}: ${JSON.stringify(detail)}`);
}

function fail(what) {
  console.log(`!! ${what}`);
  process.exit(1);
}

function timed(promise, what) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer in ${STEP_MS} ms`)), STEP_MS);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

// One DAP request as a debug_request; resolves with the debug_reply's content.
async function dap(kernel, command, args = {}) {
  seq += 1;
  const mine = seq; // requests may be outstanding together, answered in any order
  const future = kernel.requestDebug({ type: 'request', seq: mine, command, arguments: args });
  const reply = await timed(future.done, command);
  const c = reply.content;
  if (c.request_seq !== mine) fail(`${command}: request_seq ${c.request_seq}, sent ${mine}`);
  return c;
}

// debug_event messages, as JupyterLab's DebuggerService listens for them.
function events(kernel) {
  const seen = [];
  const waiting = [];
  kernel.iopubMessage.connect((_, msg) => {
    if (msg.header.msg_type !== 'debug_event') return;
    seen.push(msg.content);
    for (const w of waiting.splice(0)) w();
  });
  const wait = async (name, from) => {
    const deadline = Date.now() + STEP_MS;
    for (;;) {
      const hit = seen.slice(from).find((e) => e.event === name);
      if (hit) return hit;
      if (Date.now() > deadline) fail(`no ${name} event`);
      await new Promise((resolve) => {
        waiting.push(resolve);
        setTimeout(resolve, 200);
      });
    }
  };
  return { wait, count: () => seen.length };
}

async function main() {
  const specs = await KernelSpecAPI.getSpecs(serverSettings);
  const spec = specs.kernelspecs[KERNEL];
  if (!spec) fail(`no kernelspec ${KERNEL}`);
  step('spec', { debugger: spec.metadata && spec.metadata.debugger });

  const manager = new KernelManager({ serverSettings });
  const kernel = await timed(manager.startNew({ name: KERNEL }), 'start');
  const ev = events(kernel);
  const info = await timed(kernel.info, 'kernel_info');
  step('kernel_info', { debugger: info.debugger });

  // JupyterLab: debugInfo as soon as it connects, before anything else
  let di = await dap(kernel, 'debugInfo');
  step('debugInfo', { success: di.success, isStarted: di.body.isStarted });

  const init = await dap(kernel, 'initialize', {
    clientID: 'jupyterlab', clientName: 'JupyterLab', adapterID: 'python', pathFormat: 'path',
    linesStartAt1: true, columnsStartAt1: true, supportsVariableType: true,
    supportsVariablePaging: true, supportsRunInTerminalRequest: true, locale: 'en-us',
  });
  step('initialize', { success: init.success });
  const attach = await dap(kernel, 'attach', {});
  step('attach', { success: attach.success });
  di = await dap(kernel, 'debugInfo');
  step('started', { isStarted: di.body.isStarted, prefix: di.body.tmpFilePrefix });

  const dumped = await dap(kernel, 'dumpCell', { code: CELL });
  const path = dumped.body.sourcePath;
  await dap(kernel, 'debugInfo');
  const bps = await dap(kernel, 'setBreakpoints', {
    breakpoints: [{ line: 2 }], source: { path }, sourceModified: false,
  });
  step('setBreakpoints', {
    verified: bps.body.breakpoints.map((b) => b.verified), inPrefix: path.startsWith(di.body.tmpFilePrefix),
  });

  let mark = ev.count();
  const exec = kernel.requestExecute({ code: CELL, stop_on_error: false });
  let result = null;
  exec.onIOPub = (msg) => {
    if (msg.header.msg_type === 'execute_result') result = msg.content.data['text/plain'];
  };
  const stopped = await ev.wait('stopped', mark);
  const tid = stopped.body.threadId;
  step('stopped', { reason: stopped.body.reason });
  di = await dap(kernel, 'debugInfo'); // answered while the cell is stopped
  step('stoppedThreads', { has: di.body.stoppedThreads.includes(tid) });

  const stack = await dap(kernel, 'stackTrace', { threadId: tid });
  const frames = stack.body.stackFrames;
  step('stackTrace', { names: frames.map((f) => f.name), line: frames[0].line });
  const scopes = (await dap(kernel, 'scopes', { frameId: frames[0].id })).body.scopes;
  // every scope's variables at once, as JupyterLab's variables panel asks
  const vars = await Promise.all(scopes.map((s) => dap(kernel, 'variables', {
    variablesReference: s.variablesReference,
  })));
  const locals = Object.fromEntries(vars[0].body.variables.map((v) => [v.name, v.value]));
  const globals = vars[1].body.variables.map((v) => v.name);
  step('variables', { locals, internal: globals.filter((n) => ['In', 'Out', 'get_ipython', '_ih'].includes(n)) });
  const rich = await dap(kernel, 'richInspectVariables', { variableName: 'b', frameId: frames[0].id });
  step('richInspectVariables', rich.body.data);
  // the variables panel's "Copy to Globals", offered when debugInfo says so:
  // the same name, from the top frame, then the frame's scopes read again
  const copied = await dap(kernel, 'copyToGlobals', {
    srcVariableName: 'b', dstVariableName: 'b', srcFrameId: frames[0].id,
  });
  const again = (await dap(kernel, 'scopes', { frameId: frames[0].id })).body.scopes;
  const globalsRef = again.find((s) => s.name === 'Globals').variablesReference;
  const copy = (await dap(kernel, 'variables', { variablesReference: globalsRef })).body.variables
    .find((v) => v.name === 'b');
  step('copyToGlobals', {
    offered: di.body.copyToGlobals, success: copied.success, global: copy ? copy.value : null,
  });

  mark = ev.count();
  await dap(kernel, 'next', { threadId: tid });
  const stepped = await ev.wait('stopped', mark);
  const line = (await dap(kernel, 'stackTrace', { threadId: tid })).body.stackFrames[0].line;
  step('next', { reason: stepped.body.reason, line });
  await dap(kernel, 'continue', { threadId: tid });
  const reply = await timed(exec.done, 'execute');
  step('continue', { status: reply.content.status, result });
  const later = kernel.requestExecute({ code: 'b * 2', stop_on_error: false });
  let laterResult = null;
  later.onIOPub = (msg) => {
    if (msg.header.msg_type === 'execute_result') laterResult = msg.content.data['text/plain'];
  };
  step('later', { status: (await timed(later.done, 'execute')).content.status, result: laterResult });

  const disc = await dap(kernel, 'disconnect', { restart: false, terminateDebuggee: false });
  di = await dap(kernel, 'debugInfo');
  step('disconnect', { success: disc.success, isStarted: di.body.isStarted });

  await timed(kernel.shutdown(), 'shutdown');
  step('shutdown', { status: kernel.status });
  manager.dispose();
}

main().catch((e) => fail(e.stack || String(e)));
