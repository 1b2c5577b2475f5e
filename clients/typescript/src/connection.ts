/**
 * One Redis connection and the namespace it is used with, shared by the
 * producer, RPC, fan-out and admin calls. Blocking reads (an RPC reply, a
 * fan-out notice) take a connection of their own from a small pool, so they
 * never hold up other commands on the shared one.
 */
import Redis from "ioredis";
import { Keys } from "./keys";
import { ScriptRunner } from "./scripts";

export const REDIS_URL_ENV = "TASKSCALE_REDIS_URL";
export const DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0";

/** A Redis client for `url` (default: TASKSCALE_REDIS_URL, else local 6379). */
export function connect(url?: string): Redis {
  return new Redis(url ?? process.env[REDIS_URL_ENV] ?? DEFAULT_REDIS_URL, {
    maxRetriesPerRequest: 20,
    enableAutoPipelining: true,
  });
}

/** Longest single blocking read; a long wait is several. */
export const MAX_BLOCK_S = 1.0;
const IDLE_BLOCKERS = 8;

export class Context {
  readonly scripts: ScriptRunner;
  private readonly idle: Redis[] = [];

  constructor(readonly redis: Redis, readonly keys: Keys) {
    this.scripts = new ScriptRunner(redis);
  }

  /** Run `fn` with a connection of its own for blocking commands. */
  async blocking<T>(fn: (conn: Redis) => Promise<T>): Promise<T> {
    const conn = this.idle.pop() ?? this.redis.duplicate({ enableAutoPipelining: false });
    let healthy = true;
    try {
      return await fn(conn);
    } catch (err) {
      healthy = false;
      throw err;
    } finally {
      if (healthy && this.idle.length < IDLE_BLOCKERS) this.idle.push(conn);
      else conn.disconnect();
    }
  }

  /** Redis TIME in unix ms (the clock every script uses). */
  async nowMs(): Promise<number> {
    const [s, us] = (await this.redis.time()) as [string | number, string | number];
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  }

  close(): void {
    for (const conn of this.idle.splice(0)) conn.disconnect();
  }
}

/** Block in slices of at most MAX_BLOCK_S until `attempt` gives a value or
 * `timeoutS` passes (null: forever). */
export async function blockInSlices<T>(
  timeoutS: number | null,
  attempt: (blockS: number) => Promise<T | null>,
): Promise<T | null> {
  if (timeoutS !== null && (typeof timeoutS !== "number" || Number.isNaN(timeoutS) || timeoutS < 0)) {
    throw new RangeError(`timeout must be seconds >= 0 or null (no limit), not ${String(timeoutS)}`);
  }
  const deadline = timeoutS === null || !Number.isFinite(timeoutS) ? null : Date.now() + timeoutS * 1000;
  for (;;) {
    let block = MAX_BLOCK_S;
    if (deadline !== null) {
      const remaining = (deadline - Date.now()) / 1000;
      if (remaining <= 0) return null;
      block = Math.max(0.01, Math.min(MAX_BLOCK_S, remaining));
    }
    const value = await attempt(block);
    if (value !== null) return value;
  }
}
