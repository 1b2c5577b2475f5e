/**
 * Enqueueing: one call of enqueue.lua per task (a batch: one per chunk), as
 * taskscale/producer.py does it. The script validates, takes a unique key,
 * stamps `enqueued_ms` from the Redis clock, pushes, counts, wakes idle
 * workers and signals demand in one atomic step.
 */
import { Args, Call, Kwargs, build } from "./envelope";
import { Context } from "./connection";
import { DEFAULT_MAX_PAYLOAD_BYTES, Priority, checkName, checkUniqueKey } from "./keys";
import { TaskOptions, checkSeconds, delayToMs, optionFields } from "./options";

/** Envelopes per script call of `enqueueMany`. */
export const BATCH_CHUNK = 500;

export interface EnqueueOptions {
  /** Keyword arguments (a Python task's **kwargs). */
  kwargs?: Kwargs;
  /** Seconds until it is due (0 or unset: now). Due on the Redis clock. */
  delay?: number;
  /** 0-9 (0 most urgent) or high / normal / low; default 5. */
  priority?: Priority;
  /** The task's id (default: 32 random hex characters). */
  taskId?: string;
  /** Enqueue nothing while a task holding this key is live; its id is returned. */
  uniqueKey?: string;
  /** Seconds from the enqueue the unique key stays held even after the task finished. */
  uniqueFor?: number;
  /** Task options (retries, backoff, timeout, result TTL). */
  options?: TaskOptions;
  /** More envelope fields (e.g. `reply_to`). */
  extra?: Record<string, unknown>;
  /** Largest envelope accepted, bytes (default 1 MiB). */
  maxPayloadBytes?: number;
}

/** A task type's argument list, from a map of task types to their functions. */
export type TaskMap = Record<string, (...args: any[]) => unknown>;
export type ArgsOf<M extends TaskMap, K extends keyof M> = Parameters<M[K]>;

function fieldsOf(opts: EnqueueOptions): Record<string, unknown> {
  const fields = { ...optionFields(opts.options), ...(opts.extra ?? {}) };
  if (opts.uniqueKey !== undefined) {
    fields.unique_key = checkUniqueKey(opts.uniqueKey);
    if (opts.uniqueFor !== undefined) {
      fields.unique_for_ms = Math.round(checkSeconds("uniqueFor", opts.uniqueFor, false) * 1000);
    }
  } else if (opts.uniqueFor !== undefined) {
    throw new RangeError("uniqueFor needs a uniqueKey");
  }
  return fields;
}

/** Enqueue one task; its id (or, for a held unique key, the holder's id). */
export async function enqueue(
  ctx: Context,
  type: string,
  args: Args = [],
  opts: EnqueueOptions = {},
): Promise<string> {
  const [id, doc] = build(type, args, opts.kwargs ?? {}, {
    taskId: opts.taskId,
    priority: opts.priority,
    extra: fieldsOf(opts),
    maxBytes: opts.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES,
  });
  const holders = await push(ctx, type, [doc], opts.delay, opts.maxPayloadBytes);
  return holders.get(0) ?? id;
}

/** Enqueue one task per call (an args array or a `Call`); their ids. Each chunk is atomic. */
export async function enqueueMany(
  ctx: Context,
  type: string,
  calls: Iterable<Args | Call>,
  opts: Omit<EnqueueOptions, "kwargs" | "taskId" | "uniqueKey" | "uniqueFor"> = {},
): Promise<string[]> {
  const fields = fieldsOf(opts);
  const ids: string[] = [];
  const docs: string[] = [];
  for (const item of calls) {
    const call = item instanceof Call ? item : new Call(item);
    const [id, doc] = build(type, call.args, call.kwargs, {
      priority: opts.priority,
      extra: fields,
      maxBytes: opts.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES,
    });
    ids.push(id);
    docs.push(doc);
  }
  for (let start = 0; start < docs.length; start += BATCH_CHUNK) {
    await push(ctx, type, docs.slice(start, start + BATCH_CHUNK), opts.delay, opts.maxPayloadBytes);
  }
  return ids;
}

/** Run enqueue.lua; {index of a skipped envelope: the holder's id}. */
async function push(
  ctx: Context,
  type: string,
  docs: string[],
  delay: number | undefined,
  maxBytes: number | undefined,
): Promise<Map<number, string>> {
  checkName("task type", type);
  const args = [ctx.keys.prefix, type, delayToMs(delay), maxBytes ?? DEFAULT_MAX_PAYLOAD_BYTES, ...docs];
  const reply = (await ctx.scripts.run("enqueue", [ctx.keys.types], args)) as unknown[];
  const holders = new Map<number, string>();
  for (let i = 1; i + 1 < reply.length; i += 2) holders.set(Number(reply[i]) - 1, String(reply[i + 1]));
  return holders;
}
