// The TypeScript client's enqueue rate, for bench/ts_client_bench.py:
// `node enqueue_bench.js MODE N` enqueues N no-ops (MODE: "single" = one
// awaited enqueue at a time, "inflight64" = up to 64 enqueues in flight,
// "batch" = enqueueMany) to TASKSCALE_REDIS_URL and prints the seconds spent
// in those calls (connecting excluded).
"use strict";
const path = require("node:path");
const { Client } = require(path.join(__dirname, "..", "dist"));

async function main() {
  const [mode, n] = [process.argv[2], Number(process.argv[3])];
  const client = new Client();
  await client.redis.ping();
  await client.enqueue("noop", []); // load the script once, outside the timing
  const started = process.hrtime.bigint();
  if (mode === "batch") {
    await client.enqueueMany("noop", Array.from({ length: n }, () => []));
  } else {
    const most = mode === "inflight64" ? 64 : 1;
    const pending = [];
    for (let i = 0; i < n; i++) {
      pending.push(client.enqueue("noop", []));
      if (pending.length >= most) await Promise.all(pending.splice(0));
    }
    await Promise.all(pending);
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  await client.close();
  process.stdout.write(JSON.stringify({ seconds }) + "\n");
}

main();
