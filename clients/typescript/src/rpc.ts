/**
 * RPC over the queue (docs/schema.md, "RPC replies"): an ordinary task whose
 * envelope names `reply_to` = `{NS}:reply:ID`; the worker's complete / fail
 * script pushes one JSON reply there, and the caller BLPOPs it.
 */
import { Args } from "./envelope";
import { Context, blockInSlices } from "./connection";
import { newTaskId } from "./envelope";
import { EnqueueOptions, enqueue } from "./producer";

/** The task raised (with no retries left) on its worker. */
export class RemoteError extends Error {
  override name = "RemoteError";
  constructor(readonly taskId: string, readonly errorType: string, readonly remoteMessage: string) {
    super(`${errorType}: ${remoteMessage} (remote task ${taskId})`);
  }
}

/** No reply in time; the task may still run (its reply then expires unread). */
export class TaskTimeout extends Error {
  override name = "TaskTimeout";
  constructor(readonly taskId: string, readonly timeoutS: number, readonly cause_: string = "") {
    super(`no reply from task ${taskId} within ${timeoutS} s${cause_ ? ": " + cause_ : ""}`);
  }
}

/** `requireWorker` and no live worker serves the type: nothing was enqueued. */
export class NoLiveWorker extends Error {
  override name = "NoLiveWorker";
  constructor(readonly taskType: string) {
    super(`no live worker serves '${taskType}'; the call was not enqueued (requireWorker)`);
  }
}

export interface CallOptions extends Omit<EnqueueOptions, "taskId" | "extra" | "uniqueKey" | "uniqueFor"> {
  /** Seconds to wait for the reply (default 30; null: forever). */
  timeout?: number | null;
  /** Retries before the error is the reply. Unset (the default): the task's own, as for any
   * enqueue (options.maxRetries, else the worker's registered or default 3; a retry is
   * promoted by a running `taskscale scheduler`). 0: the first error is the reply, at once. */
  maxRetries?: number;
  /** Refuse (NoLiveWorker) instead of enqueueing when no live worker serves the type. */
  requireWorker?: boolean;
}

export interface Reply {
  id: string;
  ok: boolean;
  result?: unknown;
  error_type?: string;
  error?: string;
}

export function unwrap(reply: Reply, taskId: string): unknown {
  if (!reply.ok) throw new RemoteError(reply.id || taskId, reply.error_type || "Exception", reply.error ?? "");
  return reply.result ?? null;
}

/** Ids of the live workers (lease in the future) that serve `type`. */
export async function liveWorkersServing(ctx: Context, type: string): Promise<string[]> {
  const now = await ctx.nowMs();
  const live = await ctx.redis.zrangebyscore(ctx.keys.workers, now, "+inf");
  const served: string[] = [];
  for (const id of live) {
    const types = await ctx.redis.hget(ctx.keys.worker(id), "types");
    if (types !== null && types.split(",").includes(type)) served.push(id);
  }
  return served;
}

/** A pending RPC result; `get` consumes the reply (one reader per task). */
export class RpcHandle {
  private reply: Reply | undefined;
  constructor(private readonly ctx: Context, readonly id: string, readonly taskType?: string) {}

  get replyKey(): string {
    return this.ctx.keys.reply(this.id);
  }

  /** The result; RemoteError if the task failed, TaskTimeout if no reply came in time. */
  async get(timeoutS: number | null = 30): Promise<unknown> {
    if (this.reply === undefined) {
      const key = this.replyKey;
      const raw = await this.ctx.blocking((conn) =>
        blockInSlices(timeoutS, async (block) => {
          const got = await conn.blpop(key, block);
          return got === null ? null : got[1];
        }),
      );
      if (raw === null) {
        let cause = "";
        if (this.taskType !== undefined) {
          try {
            if ((await liveWorkersServing(this.ctx, this.taskType)).length === 0) {
              cause = `no live worker serves '${this.taskType}': the task waits in its queue`;
            }
          } catch {
            cause = "";
          }
        }
        throw new TaskTimeout(this.id, timeoutS ?? 0, cause);
      }
      const data = JSON.parse(raw) as Reply;
      if (data === null || typeof data !== "object" || !("ok" in data)) {
        throw new Error(`malformed RPC reply: ${raw.slice(0, 200)}`);
      }
      this.reply = data;
    }
    return unwrap(this.reply, this.id);
  }
}

/** Enqueue `type(...args)` as an RPC; a handle to get the result later. */
export async function callAsync(ctx: Context, type: string, args: Args = [], opts: CallOptions = {}): Promise<RpcHandle> {
  if (opts.requireWorker && (await liveWorkersServing(ctx, type)).length === 0) throw new NoLiveWorker(type);
  const taskId = newTaskId();
  const maxRetries = opts.maxRetries ?? opts.options?.maxRetries;
  const options = maxRetries === undefined ? { ...(opts.options ?? {}) } : { ...(opts.options ?? {}), maxRetries };
  await enqueue(ctx, type, args, { ...opts, options, taskId, extra: { reply_to: ctx.keys.reply(taskId) } });
  return new RpcHandle(ctx, taskId, type);
}

/** Run `type(...args)` on a worker and return its result. */
export async function call(ctx: Context, type: string, args: Args = [], opts: CallOptions = {}): Promise<unknown> {
  const handle = await callAsync(ctx, type, args, opts);
  return handle.get(opts.timeout === undefined ? 30 : opts.timeout);
}
