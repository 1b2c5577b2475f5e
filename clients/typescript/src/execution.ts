/**
 * Running one claimed task and turning what happened into an outcome for
 * complete.lua / fail.lua, by the rules of taskscale/worker/execution.py:
 * an error is retried with backoff until max_retries, then dead-lettered
 * (with an RPC error reply); arguments that do not fit are dead-lettered at
 * once; a task its workers died on max_lost times is not run again; a result
 * that is not JSON is a failure; a run over its timeout fails with RunTimeout.
 */
import { Kwargs } from "./envelope";
import { TaskOptions } from "./options";
import { TaskDefinition, TaskRegistry, taskStorage } from "./registry";

export const MAX_TRACEBACK_CHARS = 8000;

/** Backoff of failed tasks: base * factor ** attempts, capped, +-jitter (RetryPolicy in Python). */
export interface RetryPolicy {
  baseS: number;
  factor: number;
  capS: number;
  jitter: number;
}
export const DEFAULT_RETRY: RetryPolicy = { baseS: 1, factor: 2, capS: 3600, jitter: 0.1 };

export interface Resolved {
  maxRetries: number;
  /** ms: an exponential base, or a schedule. */
  backoffBaseMs: number | null;
  backoffScheduleMs: number[] | null;
  backoffMaxMs: number | null;
  timeoutMs: number | null;
  resultTtl: number;
}

export interface Envelope {
  id: string;
  type: string;
  args: unknown[];
  kwargs: Kwargs;
  attempts: number;
  reaped: number;
  reply_to: string;
  fanout: string;
  fields: Record<string, unknown>;
}

export interface Outcome {
  taskId: string;
  taskType: string;
  kind: "ok" | "retry" | "dead";
  serviceMs: number;
  replyTo: string;
  replyTtl: number;
  reply: string;
  fanout: string;
  retryEnvelope: string;
  backoffMs: number;
  error: string;
  traceback: string;
}

function whole(value: unknown, least: number): number | null {
  return typeof value === "number" && Number.isFinite(value) && value >= least ? Math.trunc(value) : null;
}

function int(value: unknown, fallback: number): number {
  return typeof value === "number" && Number.isFinite(value) ? Math.trunc(value) : fallback;
}

/** Each option from the envelope when set and well-formed, else declared, else the runtime's. */
export function resolve(fields: Record<string, unknown>, declared: TaskOptions = {}): Resolved {
  let schedule: number[] | null = null;
  let base: number | null = null;
  const raw = fields.retry_backoff_ms;
  if (Array.isArray(raw)) {
    const steps = raw.map((s) => whole(s, 0));
    if (steps.length && !steps.includes(null)) schedule = steps as number[];
  } else {
    base = whole(raw, 1);
  }
  if (schedule === null && base === null && declared.retryBackoff !== undefined) {
    if (Array.isArray(declared.retryBackoff)) schedule = declared.retryBackoff.map((s) => Math.round(s * 1000));
    else base = Math.round(declared.retryBackoff * 1000);
  }
  const sec = (v: number | undefined) => (v === undefined ? null : Math.round(v * 1000));
  return {
    maxRetries: whole(fields.max_retries, 0) ?? declared.maxRetries ?? 3,
    backoffBaseMs: base,
    backoffScheduleMs: schedule,
    backoffMaxMs: whole(fields.retry_backoff_max_ms, 1) ?? sec(declared.retryBackoffMax),
    timeoutMs: whole(fields.timeout_ms, 1) ?? sec(declared.timeout),
    resultTtl: whole(fields.reply_ttl, 1) ?? declared.resultTtl ?? 300,
  };
}

/** The backoff before the next attempt, ms. */
export function backoffMs(policy: RetryPolicy, opts: Resolved, attempts: number, rand: () => number = Math.random): number {
  const schedule = opts.backoffScheduleMs;
  if (schedule) return Math.max(1, schedule[Math.min(attempts, schedule.length - 1)]);
  const baseS = opts.backoffBaseMs !== null ? opts.backoffBaseMs / 1000 : policy.baseS;
  const capS = opts.backoffMaxMs !== null ? opts.backoffMaxMs / 1000 : policy.capS;
  const delay = Math.min(capS, baseS * policy.factor ** Math.max(0, Math.min(attempts, 64)));
  const spread = delay * (1 + policy.jitter * (2 * rand() - 1));
  return Math.max(1, Math.round(spread * 1000));
}

export class EnvelopeError extends Error {}

export function decode(raw: string): Envelope {
  let doc: unknown;
  try {
    doc = JSON.parse(raw);
  } catch (err) {
    throw new EnvelopeError(`envelope is not JSON: ${(err as Error).message}`);
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) throw new EnvelopeError("envelope is not a JSON object");
  const d = doc as Record<string, unknown>;
  if (typeof d.id !== "string" || typeof d.type !== "string") throw new EnvelopeError('envelope needs string "id" and "type"');
  const args = d.args ?? [];
  const kwargs = d.kwargs ?? {};
  if (!Array.isArray(args) || kwargs === null || typeof kwargs !== "object" || Array.isArray(kwargs)) {
    throw new EnvelopeError('"args" must be an array and "kwargs" an object');
  }
  return {
    id: d.id,
    type: d.type,
    args,
    kwargs: kwargs as Kwargs,
    attempts: int(d.attempts, 0),
    reaped: int(d.reaped, 0),
    reply_to: typeof d.reply_to === "string" ? d.reply_to : "",
    fanout: typeof d.fanout === "string" ? d.fanout : "",
    fields: d,
  };
}

export class RunTimeout extends Error {
  override name = "RunTimeout";
}

function errorName(err: unknown): string {
  if (err instanceof Error) {
    const ctor = (err as { constructor?: { name?: string } }).constructor?.name;
    return err.name && err.name !== "Error" ? err.name : ctor || "Error";
  }
  return "Error";
}

function outcome(env: { id: string; type: string }, kind: Outcome["kind"], serviceMs: number, more: Partial<Outcome> = {}): Outcome {
  return {
    taskId: env.id, taskType: env.type, kind, serviceMs, replyTo: "", replyTtl: 300, reply: "", fanout: "",
    retryEnvelope: "", backoffMs: 0, error: "", traceback: "", ...more,
  };
}

export interface RunnerSettings {
  workerId: string;
  retry: RetryPolicy;
  maxLost: number;
  isCancelled: (taskId: string) => Promise<boolean>;
  log: (line: string) => void;
}

export class TaskRunner {
  constructor(private readonly registry: TaskRegistry<any>, private readonly s: RunnerSettings) {}

  /** Run one claimed task; never throws. */
  async run(taskType: string, taskId: string, raw: string): Promise<Outcome> {
    let env: Envelope;
    try {
      env = decode(raw);
    } catch (err) {
      return outcome({ id: taskId, type: taskType }, "dead", 0, { error: (err as Error).message });
    }
    try {
      return await this.runEnvelope(env);
    } catch (err) {
      return this.failed(env, 0, "WorkerError", `${errorName(err)}: ${(err as Error)?.message}`, true);
    }
  }

  private async runEnvelope(env: Envelope): Promise<Outcome> {
    if (env.reaped >= this.s.maxLost) {
      const why = `its worker died ${env.reaped} times while running it (lease expired); dead-lettered instead of run again (--max-lost ${this.s.maxLost})`;
      return this.failed(env, 0, "LostWorker", why, true);
    }
    const def = this.registry.get(env.type);
    if (def === undefined) {
      return this.failed(env, 0, "UnknownTaskType", `no function registered for task type '${env.type}' on worker ${this.s.workerId}`, true);
    }
    const names = Object.keys(env.kwargs);
    if (names.length && !def.kwargs) {
      const error = `arguments do not match ${env.type}: unexpected keyword arguments ${names.join(", ")} (register it with {kwargs: true})`;
      this.s.log(`task ${env.type} ${env.id} dead-lettered: ${error}`);
      return this.failed(env, 0, "TypeError", error, true, "", def);
    }
    const opts = resolve(env.fields, def.options);
    const started = performance.now();
    const abort = new AbortController();
    const context = {
      id: env.id, type: env.type, workerId: this.s.workerId, attempt: env.attempts + 1, kwargs: env.kwargs,
      signal: abort.signal, isCancelled: () => this.s.isCancelled(env.id),
    };
    let result: unknown;
    try {
      const args = def.kwargs ? [...env.args, env.kwargs] : env.args;
      result = await withTimeout(() => taskStorage.run(context, () => def.fn(...args)), opts.timeoutMs, abort);
    } catch (err) {
      const ms = performance.now() - started;
      const message = err instanceof Error ? err.message : String(err);
      const tb = err instanceof Error && err.stack ? err.stack.slice(-MAX_TRACEBACK_CHARS) : "";
      this.s.log(`task ${env.type} ${env.id} failed (attempt ${env.attempts + 1} of ${opts.maxRetries + 1}): ${errorName(err)}: ${message}`);
      return this.failed(env, ms, errorName(err), message, false, tb, def);
    }
    const ms = performance.now() - started;
    let body: string;
    try {
      body = toJson(result);
    } catch (err) {
      const message = `result of ${env.type} is not JSON-serialisable: ${(err as Error).message}`;
      return this.failed(env, ms, "TypeError", message, false, "", def);
    }
    const reply = env.reply_to || collects(env) ? `{"id":${JSON.stringify(env.id)},"ok":true,"result":${body}}` : "";
    return outcome(env, "ok", Math.round(ms), { replyTo: env.reply_to, replyTtl: opts.resultTtl, reply, fanout: env.fanout });
  }

  /** A retry while attempts remain (and not final), else a dead letter. */
  failed(env: Envelope, ms: number, errorType: string, error: string, final: boolean, tb = "", def?: TaskDefinition): Outcome {
    const opts = resolve(env.fields, (def ?? this.registry.get(env.type))?.options);
    if (!final && env.attempts < opts.maxRetries) {
      const doc: Record<string, unknown> = { ...env.fields };
      delete doc.due_ms;
      doc.attempts = env.attempts + 1;
      return outcome(env, "retry", Math.round(ms), {
        retryEnvelope: JSON.stringify(doc),
        backoffMs: backoffMs(this.s.retry, opts, env.attempts),
        error: `${errorType}: ${error}`,
      });
    }
    const reply = env.reply_to || collects(env) ? JSON.stringify({ id: env.id, ok: false, error_type: errorType, error }) : "";
    return outcome(env, "dead", Math.round(ms), {
      replyTo: env.reply_to, replyTtl: opts.resultTtl, reply, fanout: env.fanout, error: `${errorType}: ${error}`, traceback: tb,
    });
  }
}

function collects(env: Envelope): boolean {
  return Boolean(env.fanout) && env.fields.fanout_collect === true;
}

/** JSON of a result (undefined is null); NaN, Infinity, BigInt and cycles are refused. */
export function toJson(value: unknown): string {
  const text = JSON.stringify(value === undefined ? null : value, (_k, v: unknown) => {
    if (typeof v === "number" && !Number.isFinite(v)) throw new TypeError(`${v} is not JSON`);
    if (typeof v === "bigint") throw new TypeError("a bigint is not JSON");
    return v;
  });
  return text === undefined ? "null" : text;
}

async function withTimeout<T>(fn: () => T | Promise<T>, timeoutMs: number | null, abort: AbortController): Promise<T> {
  if (timeoutMs === null) return await fn();
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      abort.abort();
      reject(new RunTimeout(`the task ran longer than its timeout of ${timeoutMs / 1000} s`));
    }, timeoutMs);
  });
  try {
    return await Promise.race([Promise.resolve().then(fn), expired]);
  } finally {
    clearTimeout(timer);
  }
}
