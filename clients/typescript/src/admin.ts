/**
 * Cancel, flow-control limits and periodic schedules, each one script call
 * as the Python API and CLI make it (taskscale/cancellation.py, limits.py,
 * scheduling/schedules.py).
 */
import { Args, Kwargs, build } from "./envelope";
import { Context } from "./connection";
import { Priority, checkName, checkScheduleName } from "./keys";
import { TaskOptions, checkSeconds, optionFields } from "./options";

/** Seconds the running flag `cancel:ID` is kept. */
export const CANCEL_FLAG_TTL_S = 86400;
/** Most ready-list entries searched per type. */
export const CANCEL_SEARCH_LIMIT = 200_000;

export type CancelState = "running" | "queued" | "delayed" | "pending" | "unknown";

export interface CancelResult {
  state: CancelState;
  /** The worker (running), the type (queued / delayed) or the fan-out (pending). */
  where: string;
  /** True when the task was removed before it ran. */
  removed: boolean;
}

/** Cancel task `taskId`: removed if queued or delayed, flagged if running. */
export async function cancel(ctx: Context, taskId: string, opts: { type?: string; fanout?: string } = {}): Promise<CancelResult> {
  checkName("task id", taskId);
  if (opts.type) checkName("task type", opts.type);
  if (opts.fanout) checkName("fan-out id", opts.fanout);
  const [state, where] = (await ctx.scripts.run("cancel", [ctx.keys.types, ctx.keys.workers], [
    ctx.keys.prefix, taskId, opts.type ?? "", CANCEL_FLAG_TTL_S, CANCEL_SEARCH_LIMIT, opts.fanout ?? "",
  ])) as [CancelState, string];
  return { state, where, removed: state === "queued" || state === "delayed" || state === "pending" };
}

export interface Limits {
  /** "N/UNIT": 100/s, 10/min, 5/2s, 3/500ms, 1000/h. */
  rate?: string;
  /** Most tasks of the type running at once across every worker. */
  concurrency?: number;
  /** Tokens the bucket holds when full (default 1). */
  burst?: number;
}

const UNITS_S: Record<string, number> = { ms: 0.001, s: 1, sec: 1, m: 60, min: 60, h: 3600 };

/** "100/s" -> [100, 1.0 seconds]. */
export function parseRate(text: string): [number, number] {
  const m = /^\s*(\d+)\s*\/\s*(\d*\.?\d*)\s*([a-z]+)\s*$/.exec(text.toLowerCase());
  const unit = m ? UNITS_S[m[3]] : undefined;
  if (!m || unit === undefined) {
    throw new RangeError(`invalid rate '${text}': use N/UNIT, e.g. 100/s, 10/min, 5/2s, 3/500ms`);
  }
  const period = Number(m[2] || 1) * unit;
  const count = Number(m[1]);
  if (count < 1 || !Number.isFinite(period) || period < 0.001) {
    throw new RangeError(`invalid rate '${text}': at least 1 task per at least 1 ms`);
  }
  if (count > 1e9 || period > 315_360_000) throw new RangeError(`invalid rate '${text}': at most 1e9 tasks per at most 10 years`);
  return [count, period];
}

function whole(name: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > 1e9) {
    throw new RangeError(`invalid ${name} ${JSON.stringify(value)}: a whole number from 1 to 1e9`);
  }
  return value;
}

/** Replace the limits of `type` (what is not given is no limit). */
export async function setLimits(ctx: Context, type: string, limits: Limits): Promise<boolean> {
  checkName("task type", type);
  if (limits.rate === undefined && limits.concurrency === undefined) {
    throw new RangeError("give a rate, a concurrency or both (clearLimits removes them)");
  }
  const doc: Record<string, number> = {};
  if (limits.rate !== undefined) {
    const [count, period] = parseRate(limits.rate);
    doc.rate = count;
    doc.period_ms = Math.round(period * 1000);
    doc.burst = whole("burst", limits.burst ?? 1);
  }
  if (limits.concurrency !== undefined) doc.concurrency = whole("concurrency", limits.concurrency);
  return Number(await ctx.scripts.run("limits_set", [ctx.keys.limits], [ctx.keys.prefix, type, JSON.stringify(doc)])) === 1;
}

/** Remove the limits of `type`; true if it had any. */
export async function clearLimits(ctx: Context, type: string): Promise<boolean> {
  checkName("task type", type);
  return Number(await ctx.scripts.run("limits_set", [ctx.keys.limits], [ctx.keys.prefix, type, ""])) === 1;
}

/** Every type's limits, as stored (JSON objects). */
export async function getLimits(ctx: Context): Promise<Record<string, Record<string, number>>> {
  const raw = await ctx.redis.hgetall(ctx.keys.limits);
  const out: Record<string, Record<string, number>> = {};
  for (const [type, text] of Object.entries(raw)) {
    try {
      out[type] = JSON.parse(text) as Record<string, number>;
    } catch {
      // a foreign writer's bad value means no limit (docs/schema.md)
    }
  }
  return out;
}

export interface ScheduleOptions {
  /** Cron expression (5 fields, or 6 with seconds first); checked by the scheduler. */
  cron?: string;
  /** Or: seconds between occurrences (at the multiples of it since the epoch). */
  every?: number;
  /** IANA time zone of the cron expression (default UTC). */
  tz?: string;
  priority?: Priority;
  kwargs?: Kwargs;
  options?: TaskOptions;
  /** After downtime, run every missed occurrence (default: the missed ones once). */
  catchUp?: boolean;
}

/** Create or replace schedule `name`: "created" | "updated" | "unchanged". A running
 * scheduler materializes its first occurrence at once (the script wakes it). */
export async function addSchedule(
  ctx: Context,
  name: string,
  type: string,
  args: Args = [],
  o: ScheduleOptions = {},
): Promise<string> {
  checkScheduleName(name);
  checkName("task type", type);
  if ((o.cron === undefined) === (o.every === undefined)) throw new RangeError("give exactly one of cron and every");
  const everyMs = o.every === undefined ? "" : String(Math.max(1, Math.round(checkSeconds("every", o.every) * 1000)));
  const [, doc] = build(type, args, o.kwargs ?? {}, { priority: o.priority, extra: optionFields(o.options) });
  const template = JSON.parse(doc) as Record<string, unknown>;
  delete template.id;
  const [outcome] = (await ctx.scripts.run("schedule_add", [ctx.keys.schedules], [
    ctx.keys.prefix, name, type, JSON.stringify(template), o.cron ?? "", everyMs, o.tz ?? "", o.catchUp ? "1" : "0",
  ])) as [string, number];
  return outcome;
}

/** pause | resume | remove: "done", "unchanged" or "missing". */
export async function controlSchedule(ctx: Context, name: string, mode: "pause" | "resume" | "remove"): Promise<string> {
  checkScheduleName(name);
  return String(await ctx.scripts.run("schedule_control", [ctx.keys.schedules], [ctx.keys.prefix, name, mode]));
}

export interface ScheduleInfo {
  name: string;
  type: string;
  cron: string;
  everyMs: number;
  tz: string;
  paused: boolean;
  nextMs: number;
  lastMs: number;
  occurrences: number;
  task: Record<string, unknown>;
  error: string;
}

/** Every schedule, by name. */
export async function listSchedules(ctx: Context): Promise<ScheduleInfo[]> {
  const names = await ctx.redis.zrange(ctx.keys.schedules, 0, -1);
  const out: ScheduleInfo[] = [];
  for (const name of names.sort()) {
    const h = await ctx.redis.hgetall(ctx.keys.schedule(name));
    if (!h.type) continue;
    out.push({
      name,
      type: h.type,
      cron: h.cron ?? "",
      everyMs: Number(h.every_ms || 0),
      tz: h.tz ?? "",
      paused: h.paused === "1",
      nextMs: Number(h.next_ms || 0),
      lastMs: Number(h.last_ms || 0),
      occurrences: Number(h.occurrences || 0),
      task: JSON.parse(h.task || "{}") as Record<string, unknown>,
      error: h.error ?? "",
    });
  }
  return out;
}
