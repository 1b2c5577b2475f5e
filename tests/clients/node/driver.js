// The TypeScript client's side of tests/clients: `node driver.js OP 'JSON'`
// runs one operation of the compiled client (clients/typescript/dist) against
// TASKSCALE_REDIS_URL / TASKSCALE_NAMESPACE and prints its outcome as one
// JSON line ({"ok": true, "value": ...} or {"ok": false, "name", "message", ...}).
"use strict";
const path = require("node:path");
const ts = require(path.join(__dirname, "..", "..", "..", "clients", "typescript", "dist"));

const ops = {
  async enqueue(c, { type, args, opts }) {
    return c.enqueue(type, args ?? [], opts ?? {});
  },
  async enqueueMany(c, { type, calls, opts }) {
    return c.enqueueMany(type, calls.map((x) => (Array.isArray(x) ? x : new ts.Call(x.args, x.kwargs))), opts ?? {});
  },
  async call(c, { type, args, opts }) {
    return c.call(type, args ?? [], opts ?? {});
  },
  async calls(c, { type, n, opts }) {
    const handles = [];
    for (let i = 0; i < n; i++) handles.push(await c.callAsync(type, [i], opts ?? {}));
    return Promise.all(handles.map((h) => h.get(opts?.timeout ?? 30)));
  },
  async fanoutSubmit(c, { type, sets, opts, timeout }) {
    const h = await c.submitFanout(type, sets, opts);
    const result = await h.wait(timeout ?? 30);
    return { ...result, status: await h.status() };
  },
  async fanoutStream(c, { type, batches, opts, timeout }) {
    const s = await c.openFanout(type, opts);
    for (const batch of batches) await s.add(batch);
    const doneAtClose = await s.close();
    const result = await s.wait(timeout ?? 30, { collect: Boolean(opts.collect) });
    let closedError = null;
    try {
      await s.add([[1]]);
    } catch (err) {
      closedError = err.name;
    }
    return { ...result, doneAtClose, closedError };
  },
  async cancel(c, { id, opts }) {
    return c.cancel(id, opts ?? {});
  },
  async setLimits(c, { type, limits }) {
    return c.setLimits(type, limits);
  },
  async clearLimits(c, { type }) {
    return c.clearLimits(type);
  },
  async schedule(c, { name, type, args, opts }) {
    return c.schedule(name, type, args ?? [], opts);
  },
  async scheduleControl(c, { name, mode }) {
    return c[`${mode}Schedule`](name);
  },
  async schedules(c) {
    return c.schedules();
  },
  async parsePriority(_c, { values }) {
    return values.map((v) => {
      try {
        return ts.parsePriority(v);
      } catch (err) {
        return err.message;
      }
    });
  },
  async backoff(_c, { fields, attempts }) {
    const policy = { baseS: 1, factor: 2, capS: 3600, jitter: 0 };
    return attempts.map((a) => ts.backoffMs(policy, ts.resolveOptions(fields, {}), a));
  },
  async benchEnqueue(c, { type, n, batch }) {
    const started = process.hrtime.bigint();
    if (batch) {
      await c.enqueueMany(type, Array.from({ length: n }, () => []));
    } else {
      const inFlight = [];
      for (let i = 0; i < n; i++) {
        inFlight.push(c.enqueue(type, []));
        if (inFlight.length >= 64) await Promise.all(inFlight.splice(0));
      }
      await Promise.all(inFlight);
    }
    return Number(process.hrtime.bigint() - started) / 1e9;
  },
};

async function main() {
  const [op, raw] = process.argv.slice(2);
  const client = new ts.Client();
  try {
    const value = await ops[op](client, JSON.parse(raw ?? "{}"));
    process.stdout.write(JSON.stringify({ ok: true, value: value === undefined ? null : value }) + "\n");
  } catch (err) {
    const out = { ok: false, name: err.name, message: err.message };
    for (const k of ["errorType", "remoteMessage", "taskId", "cause_"]) if (err[k] !== undefined) out[k] = err[k];
    process.stdout.write(JSON.stringify(out) + "\n");
  } finally {
    await client.close();
  }
}

main();
