// Test-only tasks of tests/clients, the TypeScript half (run with
// `taskscale-ts-worker --import tests/clients/node/fleet_tasks.js`):
// mark records each run's end in Redis as tests/clients/fleet_tasks.py does;
// strict takes no keyword arguments; watch waits until it is cancelled.
"use strict";
const path = require("node:path");
const ts = require(path.join(__dirname, "..", "..", "..", "clients", "typescript", "dist"));

const examples = require(path.join(__dirname, "..", "..", "..", "clients", "typescript", "dist", "examples.js"));
const redis = ts.connect();
const sleep = (s) => new Promise((resolve) => setTimeout(resolve, s * 1000));

const registry = new ts.TaskRegistry()
  .register("mark", async (n, seconds) => {
    await sleep(seconds);
    await redis.rpush("fleet:finished", `${n}:ts`);
    return n;
  })
  .register("strict", (a, b) => [a, b], { options: { maxRetries: 4 } })
  .register("declared", () => {
    throw new Error("declared options apply");
  }, { options: { maxRetries: 1, retryBackoff: [0.05] } })
  .register("watch", async () => {
    const task = ts.currentTask();
    for (let i = 0; i < 200; i++) {
      if (await task.isCancelled()) return `cancelled after ${task.attempt} attempt(s)`;
      await sleep(0.05);
    }
    return "never cancelled";
  })
  .register("bigint", () => 10n)
  .register("fail", examples.registry.get("fail").fn, { kwargs: true });

module.exports = { registry };
