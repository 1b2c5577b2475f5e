/**
 * The task envelope (docs/schema.md): compact JSON, fields in the order the
 * Python producer writes them. `enqueued_ms` is never written here: the
 * enqueue script stamps it from the Redis clock.
 */
import { randomBytes } from "node:crypto";
import { DEFAULT_MAX_PAYLOAD_BYTES, Priority, checkName, parsePriority } from "./keys";

export type Args = unknown[];
export type Kwargs = Record<string, unknown>;

export class EnvelopeError extends RangeError {
  override name = "EnvelopeError";
}
export class PayloadTooLarge extends EnvelopeError {
  override name = "PayloadTooLarge";
}

/** A new task id: 32 hex characters, as the Python producer makes them. */
export function newTaskId(): string {
  return randomBytes(16).toString("hex");
}

export interface BuildOptions {
  taskId?: string;
  priority?: Priority;
  /** Envelope fields after the standard ones (options, reply_to, fanout...). */
  extra?: Record<string, unknown>;
  maxBytes?: number;
}

/** One call's positional and keyword arguments (a batch item, a fan-out sub-task). */
export class Call {
  constructor(readonly args: Args = [], readonly kwargs: Kwargs = {}) {}
}

export function checkArgs(args: unknown, kwargs: unknown): void {
  if (!Array.isArray(args)) {
    throw new TypeError(
      "a task's args must be an array of arguments" +
        (args !== null && typeof args === "object" ? " (keyword arguments go in kwargs)" : ""),
    );
  }
  if (kwargs === null || typeof kwargs !== "object" || Array.isArray(kwargs)) {
    throw new TypeError("a task's kwargs must be an object");
  }
}

/** Encode a new envelope: `[taskId, json]`. */
export function build(
  type: string,
  args: Args = [],
  kwargs: Kwargs = {},
  opts: BuildOptions = {},
): [string, string] {
  checkName("task type", type);
  checkArgs(args, kwargs);
  const id = checkName("task id", opts.taskId ?? newTaskId());
  const doc: Record<string, unknown> = {
    id,
    type,
    args,
    kwargs,
    priority: parsePriority(opts.priority ?? 5),
    attempts: 0,
    ...(opts.extra ?? {}),
  };
  return [id, encode(doc, opts.maxBytes ?? DEFAULT_MAX_PAYLOAD_BYTES)];
}

/** Compact JSON of an envelope, size-checked (maxBytes 0 = no limit). */
export function encode(doc: Record<string, unknown>, maxBytes: number = DEFAULT_MAX_PAYLOAD_BYTES): string {
  let text: string;
  try {
    text = JSON.stringify(doc, (_k, v: unknown) => {
      if (typeof v === "number" && !Number.isFinite(v)) throw new TypeError(`${v} is not JSON`);
      if (typeof v === "bigint" || typeof v === "function" || typeof v === "symbol") {
        throw new TypeError(`a ${typeof v} is not JSON`);
      }
      return v;
    });
  } catch (err) {
    throw new EnvelopeError(`task ${String(doc.id)}: arguments are not JSON: ${(err as Error).message}`);
  }
  const size = Buffer.byteLength(text, "utf8");
  if (maxBytes && size > maxBytes) {
    throw new PayloadTooLarge(
      `task ${String(doc.type)}/${String(doc.id)}: envelope is ${size} bytes, over the limit of ${maxBytes} bytes`,
    );
  }
  return text;
}
