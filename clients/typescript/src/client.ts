/**
 * `Client`: the producer side in one object -- enqueue, RPC, fan-out,
 * cancel, limits and schedules on one Redis connection and namespace.
 * Typed by an optional map of task types to their functions, so
 * `client.enqueue("add", [1, 2])` checks the arguments at compile time.
 */
import type Redis from "ioredis";
import { Args, Call } from "./envelope";
import { Context, connect } from "./connection";
import { Keys } from "./keys";
import { EnqueueOptions, TaskMap, enqueue, enqueueMany } from "./producer";
import { CallOptions, RpcHandle, call, callAsync } from "./rpc";
import { ArgSet, FanoutHandle, FanoutOptions, FanoutStream, StreamOptions, openFanout, submitFanout } from "./fanout";
import {
  CancelResult, Limits, ScheduleInfo, ScheduleOptions, addSchedule, cancel, clearLimits,
  controlSchedule, getLimits, listSchedules, setLimits,
} from "./admin";

export interface ClientOptions {
  /** A Redis URL (default TASKSCALE_REDIS_URL, else redis://127.0.0.1:6379/0). */
  url?: string;
  /** Or an ioredis client of your own (not closed by `close()`). */
  redis?: Redis;
  /** The namespace (default TASKSCALE_NAMESPACE, else "taskscale"). */
  namespace?: string;
}

type Returns<M extends TaskMap, K extends keyof M> = Awaited<ReturnType<M[K]>>;

export class Client<M extends TaskMap = TaskMap> {
  readonly redis: Redis;
  readonly keys: Keys;
  readonly ctx: Context;
  private readonly owned: boolean;

  constructor(opts: ClientOptions = {}) {
    this.owned = opts.redis === undefined;
    this.redis = opts.redis ?? connect(opts.url);
    this.keys = new Keys(opts.namespace);
    this.ctx = new Context(this.redis, this.keys);
  }

  /** Enqueue `type(...args)`; its task id (a held unique key: the holder's id). */
  enqueue<K extends keyof M & string>(type: K, args: Parameters<M[K]>, opts?: EnqueueOptions): Promise<string> {
    return enqueue(this.ctx, type, args as Args, opts);
  }

  /** Enqueue one task per item (args array or `Call`); their ids. */
  enqueueMany<K extends keyof M & string>(
    type: K,
    calls: Iterable<Parameters<M[K]> | Call>,
    opts?: Omit<EnqueueOptions, "kwargs" | "taskId" | "uniqueKey" | "uniqueFor">,
  ): Promise<string[]> {
    return enqueueMany(this.ctx, type, calls as Iterable<Args | Call>, opts);
  }

  /** Run `type(...args)` on a worker and await its result (RemoteError, TaskTimeout). */
  async call<K extends keyof M & string>(type: K, args: Parameters<M[K]>, opts?: CallOptions): Promise<Returns<M, K>> {
    return (await call(this.ctx, type, args as Args, opts)) as Returns<M, K>;
  }

  /** Enqueue an RPC now, get its result later (`handle.get(timeout)`). */
  callAsync<K extends keyof M & string>(type: K, args: Parameters<M[K]>, opts?: CallOptions): Promise<RpcHandle> {
    return callAsync(this.ctx, type, args as Args, opts);
  }

  /** A handle on an RPC enqueued elsewhere, by task id. */
  rpcHandle(taskId: string, type?: string): RpcHandle {
    return new RpcHandle(this.ctx, taskId, type);
  }

  submitFanout<K extends keyof M & string>(type: K, sets: Iterable<ArgSet>, opts: FanoutOptions): Promise<FanoutHandle> {
    return submitFanout(this.ctx, type, sets, opts);
  }

  openFanout<K extends keyof M & string>(type: K, opts: StreamOptions): Promise<FanoutStream> {
    return openFanout(this.ctx, type, opts);
  }

  /** A handle on a fan-out (submitted or streamed) by id. */
  fanout(id: string): FanoutStream {
    return new FanoutStream(this.ctx, id, null);
  }

  cancel(taskId: string, opts?: { type?: string; fanout?: string }): Promise<CancelResult> {
    return cancel(this.ctx, taskId, opts);
  }

  setLimits(type: string, limits: Limits): Promise<boolean> {
    return setLimits(this.ctx, type, limits);
  }
  clearLimits(type: string): Promise<boolean> {
    return clearLimits(this.ctx, type);
  }
  getLimits(): Promise<Record<string, Record<string, number>>> {
    return getLimits(this.ctx);
  }

  schedule<K extends keyof M & string>(name: string, type: K, args: Parameters<M[K]>, opts: ScheduleOptions): Promise<string> {
    return addSchedule(this.ctx, name, type, args as Args, opts);
  }
  pauseSchedule(name: string): Promise<string> {
    return controlSchedule(this.ctx, name, "pause");
  }
  resumeSchedule(name: string): Promise<string> {
    return controlSchedule(this.ctx, name, "resume");
  }
  removeSchedule(name: string): Promise<string> {
    return controlSchedule(this.ctx, name, "remove");
  }
  schedules(): Promise<ScheduleInfo[]> {
    return listSchedules(this.ctx);
  }

  /** Close the connections this client opened. */
  async close(): Promise<void> {
    this.ctx.close();
    if (this.owned) await this.redis.quit();
  }
}
