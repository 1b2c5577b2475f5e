/**
 * Fan-out (docs/schema.md, "Fan-out accounting" and "Streamed fan-out"): one
 * request split into sub-tasks of one type, at most `limit` released at
 * once across every worker. `submitFanout` is one fanout_submit.lua call;
 * `openFanout` streams sub-tasks in with fanout_add.lua and ends with
 * fanout_close.lua; results are collected by position when asked.
 */
import { Args, Call, Kwargs, build, newTaskId } from "./envelope";
import { Context, blockInSlices } from "./connection";
import { DEFAULT_MAX_PAYLOAD_BYTES, Priority, WAKE_TOKENS_CAP, checkName, parsePriority } from "./keys";
import { TaskOptions, optionFields } from "./options";
import { RemoteError } from "./rpc";

/** One sub-task: an args array, a `Call` (args and kwargs), or a kwargs object. */
export type ArgSet = Args | Call | Kwargs;

export function splitArgSet(set: ArgSet): [Args, Kwargs] {
  if (Array.isArray(set)) return [set, {}];
  if (set instanceof Call) return [set.args, set.kwargs];
  if (set !== null && typeof set === "object") return [[], set];
  throw new TypeError("each argument set must be an array (positional), an object (keyword) or a Call");
}

export class FanoutTimeout extends Error {
  override name = "FanoutTimeout";
  constructor(readonly fanoutId: string, readonly timeoutS: number) {
    super(`fan-out ${fanoutId} not finished after ${timeoutS} s`);
  }
}
export class UnknownFanout extends Error {
  override name = "UnknownFanout";
}
export class FanoutClosed extends Error {
  override name = "FanoutClosed";
}

/** The outcome of one sub-task, at its position in submission order. */
export interface SubResult {
  index: number;
  ok: boolean;
  taskId?: string;
  result?: unknown;
  errorType?: string;
  error?: string;
  /** Over the fan-out's size limit: not kept. */
  dropped?: boolean;
}

export function unwrapSub(sub: SubResult): unknown {
  if (!sub.ok) throw new RemoteError(sub.taskId ?? "?", sub.errorType || "Exception", sub.error ?? "");
  if (sub.dropped) throw new RangeError(`result ${sub.index} was over the fan-out's size limit`);
  return sub.result ?? null;
}

export interface FanoutResult {
  id: string;
  total: number;
  succeeded: number;
  failed: number;
  /** With `wait({collect: true})`: one per sub-task, in submission order. */
  results?: SubResult[];
}

export interface FanoutStatus {
  id: string;
  taskType: string;
  total: number;
  limit: number;
  running: number;
  succeeded: number;
  failed: number;
  open: boolean;
}

function scriptError(err: unknown, id: string): never {
  const text = err instanceof Error ? err.message : String(err);
  if (text.includes("FANOUT_CLOSED")) throw new FanoutClosed(`fan-out ${id} is closed: no more sub-tasks`);
  if (text.includes("FANOUT_UNKNOWN")) throw new UnknownFanout(`no fan-out ${id} (never opened, or expired)`);
  throw err;
}

function parseNotice(raw: string): FanoutResult {
  const d = JSON.parse(raw) as Record<string, unknown>;
  return { id: String(d.id), total: Number(d.total), succeeded: Number(d.succeeded), failed: Number(d.failed) };
}

/** A fan-out by id, usable from any process. */
export class FanoutHandle {
  constructor(protected readonly ctx: Context, readonly id: string) {}

  /** The result if done, else null; never blocks. */
  async result(): Promise<FanoutResult | null> {
    const raw = await this.ctx.redis.lindex(this.ctx.keys.fanoutDone(this.id), 0);
    return raw === null ? null : parseNotice(raw);
  }

  /** Wait until every sub-task has finished (null: forever). */
  async wait(timeoutS: number | null = null): Promise<FanoutResult> {
    const k = this.ctx.keys;
    if (!(await this.ctx.redis.exists(k.fanout(this.id), k.fanoutDone(this.id)))) {
      throw new UnknownFanout(`no fan-out ${this.id} (never submitted, or expired)`);
    }
    const done = k.fanoutDone(this.id);
    const raw = await this.ctx.blocking((conn) =>
      // rotating the one-element list onto itself reads it without consuming it
      blockInSlices(timeoutS, (block) => conn.blmove(done, done, "RIGHT", "LEFT", block)),
    );
    if (raw === null) throw new FanoutTimeout(this.id, timeoutS ?? 0);
    return parseNotice(raw);
  }

  async status(): Promise<FanoutStatus> {
    const h = await this.ctx.redis.hgetall(this.ctx.keys.fanout(this.id));
    if (!h.type) throw new UnknownFanout(`no fan-out ${this.id} (never submitted, or expired)`);
    return {
      id: this.id,
      taskType: h.type,
      total: Number(h.total),
      limit: Number(h.limit),
      running: Number(h.running),
      succeeded: Number(h.succeeded),
      failed: Number(h.failed),
      open: h.open === "1",
    };
  }
}

export interface FanoutOptions {
  /** Most sub-tasks released at once, across every worker. */
  limit: number;
  priority?: Priority;
  /** Options of every sub-task. */
  options?: TaskOptions;
  /** Seconds the fan-out's keys are kept once done (default 86400). */
  ttl?: number;
  maxPayloadBytes?: number;
}

function checkWhole(name: string, value: unknown, most: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > most) {
    throw new RangeError(`fan-out ${name} must be an integer from 1 to ${most}, got ${JSON.stringify(value)}`);
  }
  return value;
}

function subEnvelopes(
  type: string,
  sets: Iterable<ArgSet>,
  level: number,
  fanoutId: string,
  o: FanoutOptions,
  defaults: Record<string, unknown> = {},
) {
  const extra = { ...defaults, ...optionFields(o.options), fanout: fanoutId };
  const ids: string[] = [];
  const docs: string[] = [];
  for (const set of sets) {
    const [args, kwargs] = splitArgSet(set);
    const [id, doc] = build(type, args, kwargs, {
      priority: level,
      extra,
      maxBytes: o.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES,
    });
    ids.push(id);
    docs.push(doc);
  }
  return { ids, docs };
}

/** Submit one sub-task of `type` per argument set; at most `limit` run at once. */
export async function submitFanout(
  ctx: Context,
  type: string,
  sets: Iterable<ArgSet>,
  o: FanoutOptions,
): Promise<FanoutHandle> {
  checkName("task type", type);
  const level = parsePriority(o.priority ?? 5);
  checkWhole("limit", o.limit, 2 ** 31);
  const ttl = checkWhole("ttl", o.ttl ?? 86400, 315_360_000);
  const id = newTaskId();
  const { docs } = subEnvelopes(type, sets, level, id, o, { max_retries: 3 }); // as FanoutSettings
  const k = ctx.keys;
  await ctx.scripts.run(
    "fanout_submit",
    [k.fanout(id), k.fanoutPending(id), k.queue(type, level), k.types, k.stats(type), k.wake(type), k.fanoutDone(id)],
    [id, type, level, o.limit, ttl, WAKE_TOKENS_CAP, k.demandChannel, ...docs],
  );
  return new FanoutHandle(ctx, id);
}

export interface StreamOptions extends FanoutOptions {
  /** Keep each sub-task's result or error for `wait({collect: true})`. */
  collect?: boolean;
  /** Most bytes of collected results (default 8 MiB). */
  maxResultBytes?: number;
  /** Seconds the results are kept once done (default: ttl). */
  resultTtl?: number;
}

/** Most sub-tasks per fanout_add call. */
export const ADD_CHUNK = 1000;

/** A streamed fan-out: add sub-tasks in any number of calls, then close it. */
export class FanoutStream extends FanoutHandle {
  constructor(ctx: Context, id: string, private target: [string, number] | null, private readonly o: Partial<StreamOptions> = {}) {
    super(ctx, id);
  }

  private async typeAndPriority(): Promise<[string, number]> {
    if (this.target === null) {
      const [type, level] = await this.ctx.redis.hmget(this.ctx.keys.fanout(this.id), "type", "priority");
      if (type === null || level === null) throw new UnknownFanout(`no fan-out ${this.id} (never opened, or expired)`);
      this.target = [type, Number(level)];
    }
    return this.target;
  }

  /** Add one sub-task per argument set; their task ids. */
  async add(sets: Iterable<ArgSet>): Promise<string[]> {
    const [type, level] = await this.typeAndPriority();
    const { ids, docs } = subEnvelopes(type, sets, level, this.id, { limit: 1, ...this.o });
    const k = this.ctx.keys;
    const keys = [
      k.fanout(this.id), k.fanoutPending(this.id), k.queue(type, level), k.types,
      k.stats(type), k.wake(type), k.fanoutResults(this.id), k.fanoutsOpen,
    ];
    for (let start = 0; start < docs.length; start += ADD_CHUNK) {
      try {
        await this.ctx.scripts.run("fanout_add", keys, [k.prefix, WAKE_TOKENS_CAP, ...docs.slice(start, start + ADD_CHUNK)]);
      } catch (err) {
        scriptError(err, this.id);
      }
    }
    return ids;
  }

  /** No more sub-tasks; true if the fan-out is done. Closing twice is harmless. */
  async close(): Promise<boolean> {
    const k = this.ctx.keys;
    try {
      const done = await this.ctx.scripts.run(
        "fanout_close",
        [k.fanout(this.id), k.fanoutPending(this.id), k.fanoutResults(this.id), k.fanoutDone(this.id), k.fanoutsOpen],
        [this.id],
      );
      return Number(done) === 1;
    } catch (err) {
      return scriptError(err, this.id);
    }
  }

  /** Wait until closed and every sub-task finished; with `collect`, the results in order. */
  override async wait(timeoutS: number | null = null, opts: { collect?: boolean } = {}): Promise<FanoutResult> {
    if (opts.collect) {
      const limit = await this.ctx.redis.hget(this.ctx.keys.fanout(this.id), "collect_max_bytes");
      if (limit !== null && Number(limit) === 0) throw new RangeError(`fan-out ${this.id} was opened without collect`);
    }
    const result = await super.wait(timeoutS);
    if (!opts.collect) return result;
    const results = await this.results();
    if (results.length !== result.total) {
      throw new RangeError(`fan-out ${this.id}: ${results.length} of ${result.total} results left (the result TTL passed?)`);
    }
    return { ...result, results };
  }

  /** The results collected so far, in submission order. */
  async results(): Promise<SubResult[]> {
    const raw = await this.ctx.redis.hgetall(this.ctx.keys.fanoutResults(this.id));
    return Object.entries(raw)
      .map(([index, value]) => [Number(index), JSON.parse(value) as Record<string, unknown>] as const)
      .sort((a, b) => a[0] - b[0])
      .map(([index, d]) => ({
        index,
        ok: Boolean(d.ok),
        taskId: d.id as string | undefined,
        result: d.result,
        errorType: String(d.error_type ?? (d.ok ? "" : "Exception")),
        error: String(d.error ?? ""),
        dropped: Boolean(d.dropped),
      }));
  }
}

/** Open a streamed fan-out of `type`. */
export async function openFanout(ctx: Context, type: string, o: StreamOptions): Promise<FanoutStream> {
  checkName("task type", type);
  const level = parsePriority(o.priority ?? 5);
  checkWhole("limit", o.limit, 2 ** 31);
  const ttl = checkWhole("ttl", o.ttl ?? 86400, 315_360_000);
  const keep = checkWhole("resultTtl", o.resultTtl ?? ttl, 315_360_000);
  const maxBytes = checkWhole("maxResultBytes", o.maxResultBytes ?? 8 * 1024 * 1024, 2 ** 40);
  const id = newTaskId();
  await ctx.scripts.run(
    "fanout_open",
    [ctx.keys.fanout(id), ctx.keys.fanoutsOpen],
    [id, type, level, o.limit, ttl, o.collect ? maxBytes : 0, keep],
  );
  return new FanoutStream(ctx, id, [type, level], o);
}
