#!/usr/bin/env node
/**
 * `taskscale-ts-worker --import ./tasks.js [--types a,b] [--concurrency 4] ...`:
 * a worker process for the task registry a module exports (as `registry` or
 * its default export), the TypeScript counterpart of `taskscale worker
 * --import module`. Redis from TASKSCALE_REDIS_URL, namespace from
 * TASKSCALE_NAMESPACE or --namespace, the pod from POD_NAME; SIGTERM drains.
 */
import * as path from "node:path";
import { TaskRegistry } from "./registry";
import { Worker, WorkerSettings } from "./worker";

const USAGE = "usage: taskscale-ts-worker --import MODULE [--types T1,T2] [--concurrency N] [--namespace NS] " +
  "[--lease S] [--heartbeat S] [--grace S] [--idle-wait S] [--max-lost N] [--worker-id ID]";

function parse(argv: string[]): { module: string; settings: WorkerSettings } {
  const settings: WorkerSettings = {};
  let module = "";
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag} needs a value\n${USAGE}`);
    const num = () => {
      const n = Number(value);
      if (!Number.isFinite(n)) throw new Error(`${flag} needs a number, not ${value}`);
      return n;
    };
    switch (flag) {
      case "--import": module = value; break;
      case "--types": settings.types = value.split(",").filter(Boolean); break;
      case "--concurrency": settings.concurrency = num(); break;
      case "--namespace": settings.namespace = value; break;
      case "--lease": settings.leaseS = num(); break;
      case "--heartbeat": settings.heartbeatS = num(); break;
      case "--grace": settings.graceS = num(); break;
      case "--idle-wait": settings.idleWaitS = num(); break;
      case "--max-lost": settings.maxLost = num(); break;
      case "--worker-id": settings.workerId = value; break;
      default: throw new Error(`unknown flag ${flag}\n${USAGE}`);
    }
  }
  if (!module) throw new Error(`--import is required\n${USAGE}`);
  return { module, settings };
}

async function main(): Promise<number> {
  let parsed;
  try {
    parsed = parse(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    return 2;
  }
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const loaded = require(path.resolve(parsed.module)) as { registry?: unknown; default?: unknown };
  const registry = loaded.registry ?? loaded.default;
  if (!(registry instanceof TaskRegistry)) {
    process.stderr.write(`${parsed.module} exports no TaskRegistry (as "registry" or default)\n`);
    return 2;
  }
  const worker = new Worker(registry, parsed.settings);
  worker.installSignalHandlers();
  return worker.run();
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`taskscale-ts-worker: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exit(1);
  },
);
