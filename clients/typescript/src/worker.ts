/**
 * The worker: claims only for free slots (claim.lua, so the backlog stays in
 * Redis where the autoscaler sees it), runs each task on the event loop,
 * records outcomes (complete.lua in batches, fail.lua), renews its lease and
 * registry record (heartbeat.lua) and publishes its catalog (catalog.lua).
 * SIGTERM: stop claiming, let running tasks finish within the grace period,
 * record them, return the rest to the head of their queues and deregister
 * (requeue.lua, final mode). ACTIVE_TASKS and IDLE_SINCE are kept by those
 * scripts, so they stay exact whatever happens to this process.
 */
import { createHash, randomBytes } from "node:crypto";
import * as os from "node:os";
import type Redis from "ioredis";
import { ReplyError } from "ioredis";
import { connect } from "./connection";
import { DEFAULT_DEAD_LETTER_CAP, Keys, checkName } from "./keys";
import { ScriptRunner } from "./scripts";
import { DEFAULT_RETRY, Outcome, RetryPolicy, TaskRunner } from "./execution";
import { TaskRegistry } from "./registry";

export interface WorkerSettings {
  /** The types to serve (default: every registered type). */
  types?: string[];
  /** Tasks run at once (the worker's slots; default 4). */
  concurrency?: number;
  /** Seconds without a heartbeat after which the reaper returns our tasks (default 10). */
  leaseS?: number;
  heartbeatS?: number;
  /** Seconds running tasks may finish after SIGTERM (default 30). */
  graceS?: number;
  /** Longest BLPOP on the wake lists while idle (default 2). */
  idleWaitS?: number;
  workerId?: string;
  /** Default POD_NAME, else the host name. */
  pod?: string;
  retry?: Partial<RetryPolicy>;
  /** A task whose worker died this many times running it is dead-lettered (default 5). */
  maxLost?: number;
  deadLetterCap?: number;
  /** For the catalog: the version of the code serving the tasks. */
  version?: string;
  url?: string;
  redis?: Redis;
  namespace?: string;
  log?: (line: string) => void;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function transient(err: unknown): boolean {
  return !(err instanceof ReplyError);
}

/** Canonical JSON (sorted keys, compact), as Python's json.dumps(sort_keys=True). */
export function sortedJson(value: unknown): string {
  if (Array.isArray(value)) return "[" + value.map(sortedJson).join(",") + "]";
  if (value !== null && typeof value === "object") {
    const obj = value as Record<string, unknown>;
    return "{" + Object.keys(obj).sort().filter((k) => obj[k] !== undefined)
      .map((k) => JSON.stringify(k) + ":" + sortedJson(obj[k])).join(",") + "}";
  }
  return JSON.stringify(value);
}

export class Worker {
  readonly id: string;
  readonly pod: string;
  readonly keys: Keys;
  readonly types: string[];
  readonly slots: number;
  private readonly redis: Redis;
  private readonly blocker: Redis;
  private readonly scripts: ScriptRunner;
  private readonly runner: TaskRunner;
  private readonly s: Required<Pick<WorkerSettings, "leaseS" | "heartbeatS" | "graceS" | "idleWaitS" | "maxLost" | "deadLetterCap">>;
  private readonly log: (line: string) => void;
  private busy = 0;
  private readonly held = new Set<string>();
  private readonly outbox: Outcome[] = [];
  private flushing: Promise<void> | null = null;
  private stopping = false;
  private forced = false;
  private exitCode = 0;
  private wakeFreed: (() => void) | null = null;
  private rotation = 0;
  private heldTypes = new Map<string, number>();
  private readonly tally = new Map<string, { completed: number; failed: number; totalMs: number }>();
  private catalogDoc = "";
  private catalogDigest = "";

  constructor(private readonly registry: TaskRegistry<any>, settings: WorkerSettings = {}) {
    this.ownsRedis = settings.redis === undefined;
    this.redis = settings.redis ?? connect(settings.url);
    this.blocker = this.redis.duplicate({ enableAutoPipelining: false });
    this.keys = new Keys(settings.namespace);
    this.scripts = new ScriptRunner(this.redis);
    this.types = settings.types ?? registry.types();
    if (!this.types.length) throw new RangeError("a worker needs at least one task type");
    for (const t of this.types) checkName("task type", t);
    this.slots = settings.concurrency ?? 4;
    if (!Number.isInteger(this.slots) || this.slots < 1) throw new RangeError("concurrency must be at least 1");
    this.s = {
      leaseS: settings.leaseS ?? 10, heartbeatS: settings.heartbeatS ?? 2, graceS: settings.graceS ?? 30,
      idleWaitS: settings.idleWaitS ?? 2, maxLost: settings.maxLost ?? 5, deadLetterCap: settings.deadLetterCap ?? DEFAULT_DEAD_LETTER_CAP,
    };
    if (!(this.s.heartbeatS > 0 && this.s.heartbeatS < this.s.leaseS)) throw new RangeError("heartbeat must be positive and shorter than the lease");
    this.pod = settings.pod ?? process.env.POD_NAME ?? os.hostname();
    const safe = this.pod.replace(/[^A-Za-z0-9_.-]/g, "-").slice(0, 96) || "worker";
    this.id = checkName("worker id", settings.workerId ?? `${safe}-${process.pid}-${randomBytes(3).toString("hex")}`);
    this.log = settings.log ?? ((line) => process.stderr.write(`taskscale worker ${this.id}: ${line}\n`));
    this.runner = new TaskRunner(registry, {
      workerId: this.id,
      retry: { ...DEFAULT_RETRY, ...(settings.retry ?? {}) },
      maxLost: this.s.maxLost,
      isCancelled: async (taskId) => (await this.redis.exists(this.keys.cancel(taskId))) > 0,
      log: this.log,
    });
    this.version = settings.version ?? null;
  }
  private readonly version: string | null;
  private readonly ownsRedis: boolean;

  /** Tasks running now. */
  get running(): number {
    return this.busy;
  }

  /** First call: graceful stop. Second call: stop now (no more waiting for tasks). */
  requestStop(): void {
    if (this.stopping) this.forced = true;
    this.stopping = true;
    this.wakeFreed?.();
    this.blocker.disconnect(); // ends a BLPOP on the wake lists at once
  }

  /** SIGTERM and SIGINT request a stop. */
  installSignalHandlers(): void {
    for (const sig of ["SIGTERM", "SIGINT"] as const) {
      process.on(sig, () => {
        this.log(`${sig} received`);
        this.requestStop();
      });
    }
  }

  /** Register, work until asked to stop, shut down gracefully; 0 (1 after a Redis error retrying can't fix). */
  async run(): Promise<number> {
    await this.heartbeat();
    const beat = setInterval(() => {
      this.heartbeat().catch((err) => {
        this.log(`heartbeat failed: ${(err as Error).message}`);
        if (!transient(err)) this.fatal(err);
      });
    }, this.s.heartbeatS * 1000);
    this.log(`serving ${this.types.join(",")} on ${this.slots} slots`);
    try {
      await this.claimLoop();
      await this.drain();
      await this.flushAll();
    } finally {
      clearInterval(beat);
    }
    const moved = await this.finalRequeue();
    this.log(`stopped; ${moved} unfinished task(s) returned to their queues`);
    this.blocker.disconnect();
    if (this.ownsRedis) await this.redis.quit().catch(() => undefined);
    return this.exitCode;
  }

  private fatal(err: unknown): void {
    this.log(`${(err as Error).message}; stopping`);
    this.exitCode = 1;
    this.requestStop();
  }

  // --- claiming -----------------------------------------------------------------

  private async claimLoop(): Promise<void> {
    let failures = 0;
    while (!this.stopping) {
      const free = this.slots - this.busy;
      if (free <= 0) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 1000);
          // claim once the tasks finishing in this turn of the event loop have all freed their slots
          this.wakeFreed = () => { clearTimeout(timer); setImmediate(resolve); };
        });
        this.wakeFreed = null;
        continue;
      }
      try {
        const got = await this.claim(free);
        if (got < free && !this.stopping) await this.pace();
        failures = 0;
      } catch (err) {
        if (this.stopping) break;
        if (!transient(err)) {
          this.fatal(err);
          break;
        }
        failures += 1;
        const delay = Math.min(5, 0.05 * 2 ** failures) * (1 + 0.2 * (2 * Math.random() - 1));
        this.log(`Redis unavailable (${(err as Error).message}); retrying in ${delay.toFixed(2)}s`);
        await sleep(delay * 1000);
        await this.reconcile().catch(() => undefined);
      }
    }
  }

  private rotatedTypes(): string[] {
    const n = this.types.length;
    const start = this.rotation++ % n;
    return [...this.types.slice(start), ...this.types.slice(0, start)];
  }

  /** One claim.lua call for up to `free` tasks; how many were claimed. */
  private async claim(free: number): Promise<number> {
    const k = this.keys;
    const reply = (await this.scripts.run("claim", [k.active, k.workers, k.inflight(this.id), k.limits], [
      k.prefix, this.id, free, this.s.deadLetterCap, ...this.rotatedTypes(),
    ])) as string[];
    if (reply[0] === "unregistered") {
      if (this.stopping) return 0;
      this.log("lease lost (reaped?); registering again");
      await this.heartbeat();
      return free;
    }
    if (reply[0] === "draining") {
      // the pod's node drains ({ns}:draining): claim nothing, ask again in a second
      await sleep(1000);
      return free;
    }
    const now = Date.now();
    this.heldTypes = new Map();
    for (const item of String(reply[2]).split(",").filter(Boolean)) {
      const [name, ms] = item.split("=");
      this.heldTypes.set(name, now + Number(ms));
    }
    let got = 0;
    for (let i = 3; i + 2 < reply.length; i += 3) {
      const [type, id, raw] = [reply[i], reply[i + 1], reply[i + 2]];
      got += 1;
      this.busy += 1;
      this.held.add(id);
      void this.execute(type, id, raw);
    }
    return got;
  }

  /** Wait for a wake token (or a held type's next token, or the idle wait). */
  private async pace(): Promise<void> {
    const now = Date.now();
    for (const [t, at] of this.heldTypes) if (at <= now) this.heldTypes.delete(t);
    const listen = this.types.filter((t) => !this.heldTypes.has(t)).map((t) => this.keys.wake(t));
    let wait = this.s.idleWaitS;
    if (this.heldTypes.size) wait = Math.min(wait, (Math.min(...this.heldTypes.values()) - now) / 1000);
    if (!listen.length || wait <= 0.004) {
      await sleep(Math.max(0, wait) * 1000);
      return;
    }
    try {
      if (this.blocker.status === "end" || this.blocker.status === "close") await this.blocker.connect();
      await this.blocker.blpop(...listen, Math.max(0.01, wait));
    } catch (err) {
      if (!this.stopping) throw err;
    }
  }

  /** After a lost claim reply: return tasks our in-flight hash holds that we never received. */
  private async reconcile(): Promise<void> {
    const ids = await this.redis.hkeys(this.keys.inflight(this.id));
    const lost = ids.filter((id) => !this.held.has(id));
    if (lost.length) {
      const moved = await this.requeue("some", lost);
      if (moved) this.log(`returned ${moved} task(s) from a lost claim reply`);
    }
  }

  // --- running and recording -------------------------------------------------------

  private async execute(type: string, id: string, raw: string): Promise<void> {
    const outcome = await this.runner.run(type, id, raw);
    this.busy -= 1;
    this.wakeFreed?.();
    this.outbox.push(outcome);
    this.scheduleFlush();
  }

  private scheduleFlush(): void {
    if (this.flushing !== null) return;
    this.flushing = (async () => {
      let failures = 0;
      // the tasks that finish in this turn of the event loop go in the same call
      await new Promise<void>((resolve) => setImmediate(resolve));
      while (this.outbox.length) {
        const batch = this.outbox.splice(0, 512);
        for (;;) {
          try {
            await this.record(batch);
            break;
          } catch (err) {
            if (!transient(err)) {
              this.log(`${batch.length} outcome(s) not recorded: ${(err as Error).message}`);
              this.fatal(err);
              break;
            }
            failures += 1;
            await sleep(Math.min(5000, 50 * 2 ** failures));
          }
        }
      }
      this.flushing = null;
    })();
  }

  private async flushAll(): Promise<void> {
    for (let i = 0; i < 1000 && (this.flushing !== null || this.outbox.length); i++) {
      if (this.flushing === null) this.scheduleFlush();
      await this.flushing;
    }
  }

  /** Completions in one complete.lua call, then each failure through fail.lua. */
  private async record(outcomes: Outcome[]): Promise<void> {
    const k = this.keys;
    const keys = [k.active, k.idleSince, k.inflight(this.id), k.limits];
    const done = outcomes.filter((o) => o.kind === "ok");
    if (done.length) {
      const args: Array<string | number> = [k.prefix, done.length];
      for (const o of done) args.push(o.taskId, o.taskType, o.serviceMs, o.replyTo, o.replyTtl, o.reply, o.fanout);
      await this.scripts.run("complete", keys, args);
    }
    for (const o of outcomes) {
      if (o.kind === "ok") continue;
      const rest = o.kind === "retry"
        ? [o.backoffMs, o.retryEnvelope, "", 0, "", ""]
        : [0, o.error, o.replyTo, o.replyTtl, o.reply, o.fanout, this.s.deadLetterCap, o.traceback];
      await this.scripts.run("fail", keys, [k.prefix, o.taskId, o.taskType, o.serviceMs, o.kind, ...rest]);
    }
    for (const o of outcomes) {
      this.held.delete(o.taskId);
      const t = this.tally.get(o.taskType) ?? { completed: 0, failed: 0, totalMs: 0 };
      if (o.kind === "ok") t.completed += 1;
      else t.failed += 1;
      t.totalMs += o.serviceMs;
      this.tally.set(o.taskType, t);
    }
  }

  // --- lease, registry record, catalog, shutdown --------------------------------------

  /** Renew the lease and the registry record; publish the catalog. */
  async heartbeat(): Promise<void> {
    const stats: Record<string, object> = {};
    for (const [type, t] of this.tally) {
      const runs = Math.max(1, t.completed + t.failed);
      stats[type] = { completed: t.completed, failed: t.failed, avg_ms: Math.round((t.totalMs / runs) * 1000) / 1000 };
    }
    const record: Record<string, string | number> = {
      id: this.id, pod: this.pod, host: os.hostname(), pid: process.pid, types: this.types.join(","),
      threads: this.slots, busy: this.busy, stats: JSON.stringify(stats),
    };
    const args: Array<string | number> = [this.id, Math.round(this.s.leaseS * 1000)];
    for (const [name, value] of Object.entries(record)) args.push(name, value);
    await this.scripts.run("heartbeat", [this.keys.workers, this.keys.worker(this.id)], args);
    await this.publishCatalog();
  }

  /** The catalog document (docs/schema.md, "The task catalog"). */
  catalogDocument(): Record<string, unknown> {
    const types: Record<string, unknown> = {};
    for (const type of this.types) {
      const def = this.registry.get(type);
      types[type] = def === undefined ? { type, registered: false } : {
        type,
        registered: true,
        function: def.fn.name || type,
        params: def.params ? def.params.map((name) => ({ name, kind: "positional_or_keyword" })) : null,
        returns: def.returns ?? null,
        doc: def.doc ?? "",
        version: this.version,
        async: def.fn.constructor?.name === "AsyncFunction",
        language: "typescript",
      };
    }
    return { format: 1, types };
  }

  private async publishCatalog(): Promise<void> {
    const lease = Math.max(1, Math.round(this.s.leaseS * 1000));
    if (!this.catalogDoc) {
      this.catalogDoc = sortedJson(this.catalogDocument());
      this.catalogDigest = createHash("sha1").update(this.catalogDoc).digest("hex");
      await this.scripts.run("catalog", [this.keys.catalog(this.id)], [lease, this.catalogDigest, this.catalogDoc]);
      return;
    }
    const fresh = await this.scripts.run("catalog", [this.keys.catalog(this.id)], [lease, this.catalogDigest, ""]);
    if (!Number(fresh)) await this.scripts.run("catalog", [this.keys.catalog(this.id)], [lease, this.catalogDigest, this.catalogDoc]);
  }

  private async drain(): Promise<void> {
    const deadline = Date.now() + this.s.graceS * 1000;
    if (this.busy) this.log(`stopping; waiting up to ${this.s.graceS}s for ${this.busy} task(s)`);
    while (this.busy > 0 && !this.forced && Date.now() < deadline) await sleep(50);
  }

  private async requeue(mode: "final" | "some", ids: string[] = []): Promise<number> {
    const k = this.keys;
    return Number(await this.scripts.run("requeue", [k.active, k.workers, k.inflight(this.id), k.worker(this.id)], [k.prefix, this.id, mode, ...ids]));
  }

  /** Return what is left and deregister; 0 (the reaper's job) if Redis stays away 10 s. */
  private async finalRequeue(): Promise<number> {
    const deadline = Date.now() + 10_000;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.requeue("final");
      } catch (err) {
        if (!transient(err) || Date.now() > deadline) {
          this.log(`Redis unreachable at shutdown (${(err as Error).message}); the reaper will return its tasks`);
          return 0;
        }
        await sleep(Math.min(1000, 50 * 2 ** attempt));
      }
    }
  }
}
