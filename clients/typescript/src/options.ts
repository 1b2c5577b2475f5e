/**
 * Task options (docs/schema.md, "The task envelope"): each option as the
 * envelope field that carries it, checked as taskscale/options.py checks it.
 * Unset options are not written, so the worker's declared defaults apply.
 */
import { MAX_SECONDS } from "./keys";

export interface TaskOptions {
  /** Retries after the first failure (0 = dead-letter at the first failure). */
  maxRetries?: number;
  /** Seconds: a number is the base of an exponential backoff, an array the
   * delay before retry 1, 2, ... exactly (its last value repeating). */
  retryBackoff?: number | number[];
  /** Seconds: the cap of the exponential backoff. */
  retryBackoffMax?: number;
  /** Seconds a run may take (a longer run fails with RunTimeout). */
  timeout?: number;
  /** Seconds an RPC reply (or a collected result) is kept. */
  resultTtl?: number;
}

function seconds(name: string, value: unknown, positive = true): number {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new RangeError(`${name} must be a finite number of seconds, not ${JSON.stringify(value)}`);
  }
  if (positive ? value <= 0 : value < 0) {
    throw new RangeError(`${name} must be ${positive ? "> 0" : ">= 0"} seconds, not ${value}`);
  }
  if (value > MAX_SECONDS) {
    throw new RangeError(`${name} must be at most ${MAX_SECONDS} s (10 years), not ${value}`);
  }
  return value;
}

export function checkRetries(name: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0) {
    throw new RangeError(`${name} must be an integer >= 0, not ${JSON.stringify(value)}`);
  }
  return value;
}

export function checkTtl(name: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > MAX_SECONDS) {
    throw new RangeError(`${name} must be whole seconds, 1 to 10 years, not ${JSON.stringify(value)}`);
  }
  return value;
}

/** The envelope fields of the options that are set (max_retries included). */
export function optionFields(options: TaskOptions | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (options === undefined) return out;
  if (options.maxRetries !== undefined) out.max_retries = checkRetries("maxRetries", options.maxRetries);
  const backoff = options.retryBackoff;
  if (backoff !== undefined) {
    if (Array.isArray(backoff)) {
      if (backoff.length === 0) throw new RangeError("a retryBackoff schedule needs at least one delay");
      out.retry_backoff_ms = backoff.map((s) => Math.round(seconds("each retryBackoff delay", s, false) * 1000));
    } else {
      out.retry_backoff_ms = Math.max(1, Math.round(seconds("retryBackoff", backoff) * 1000));
    }
  }
  if (options.retryBackoffMax !== undefined) {
    out.retry_backoff_max_ms = Math.max(1, Math.round(seconds("retryBackoffMax", options.retryBackoffMax) * 1000));
  }
  if (options.timeout !== undefined) {
    out.timeout_ms = Math.max(1, Math.round(seconds("timeout", options.timeout) * 1000));
  }
  if (options.resultTtl !== undefined) out.reply_ttl = checkTtl("resultTtl", options.resultTtl);
  return out;
}

/** `seconds` as whole ms for the enqueue script (undefined/0 = now). */
export function delayToMs(delay: number | undefined): number {
  if (delay === undefined || delay === 0) return 0;
  return Math.max(1, Math.round(seconds("delay", delay, false) * 1000));
}

export { seconds as checkSeconds };
