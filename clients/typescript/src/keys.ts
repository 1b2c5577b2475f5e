/**
 * Every Redis key name of a namespace, as taskscale/keys.py builds them
 * (docs/schema.md, "Keys"). Nothing here talks to Redis.
 */

export const DEFAULT_NAMESPACE = "taskscale";
export const DEFAULT_PRIORITY = 5;
export const PRIORITY_LEVELS = 10;
/** high / normal / low as the Python runtime names them (keys.PRIORITY_NAMES). */
export const PRIORITY_NAMES: Readonly<Record<string, number>> = { high: 0, normal: 5, low: 9 };
/** Wake lists are trimmed to this many tokens. */
export const WAKE_TOKENS_CAP = 64;
export const DEFAULT_DEAD_LETTER_CAP = 10_000;
export const DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024;
/** The longest delay or duration accepted, in seconds (10 years). */
export const MAX_SECONDS = 315_360_000;

export type PriorityName = "high" | "normal" | "low";
/** 0 (most urgent) to 9, or high / normal / low. */
export type Priority = number | PriorityName;

const NAME_RE = /^[A-Za-z0-9_.-]{1,128}$/;
const UNIQUE_RE = /^[A-Za-z0-9_.:-]{1,200}$/;
const SCHEDULE_RE = /^[A-Za-z0-9_.-]{1,100}$/;

/** `value` if it is a legal namespace, task type, task id or worker id. */
export function checkName(kind: string, value: unknown): string {
  if (typeof value !== "string" || !NAME_RE.test(value)) {
    throw new RangeError(
      `invalid ${kind} ${JSON.stringify(value)}: use 1-128 characters from A-Z a-z 0-9 _ . -`,
    );
  }
  return value;
}

export function checkUniqueKey(value: unknown): string {
  if (typeof value !== "string" || !UNIQUE_RE.test(value)) {
    throw new RangeError(
      `invalid unique key ${JSON.stringify(value)}: use 1-200 characters from A-Z a-z 0-9 _ . - :`,
    );
  }
  return value;
}

export function checkScheduleName(value: unknown): string {
  if (typeof value !== "string" || !SCHEDULE_RE.test(value)) {
    throw new RangeError(
      `invalid schedule name ${JSON.stringify(value)}: use 1-100 characters from A-Z a-z 0-9 _ . -`,
    );
  }
  return value;
}

/** 0-9 or high / normal / low -> the level (RangeError otherwise). */
export function parsePriority(value: Priority | string): number {
  if (typeof value === "string") {
    const named = PRIORITY_NAMES[value.toLowerCase()];
    if (named !== undefined) return named;
    if (!/^\d+$/.test(value)) {
      throw new RangeError(
        `invalid priority ${JSON.stringify(value)}: use 0-9 (0 = most urgent) or high/normal/low`,
      );
    }
    value = Number(value);
  }
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > 9) {
    throw new RangeError(`invalid priority ${JSON.stringify(value)}: use 0-9 (0 = most urgent)`);
  }
  return value;
}

/** Key names for one namespace: `new Keys("taskscale").active` is `{taskscale}:ACTIVE_TASKS`. */
export class Keys {
  readonly namespace: string;
  /** `{namespace}:`, the hash tag every key of the namespace starts with. */
  readonly prefix: string;

  constructor(namespace: string = process.env.TASKSCALE_NAMESPACE || DEFAULT_NAMESPACE) {
    this.namespace = checkName("namespace", namespace);
    this.prefix = `{${namespace}}:`;
  }

  get active(): string { return this.prefix + "ACTIVE_TASKS"; }
  get idleSince(): string { return this.prefix + "IDLE_SINCE"; }
  get types(): string { return this.prefix + "types"; }
  get workers(): string { return this.prefix + "workers"; }
  get demandChannel(): string { return this.prefix + "demand"; }
  get schedulerWake(): string { return this.prefix + "wake:scheduler"; }
  get schedulers(): string { return this.prefix + "schedulers"; }
  get schedules(): string { return this.prefix + "schedules"; }
  get limits(): string { return this.prefix + "limits"; }
  get fanoutsOpen(): string { return this.prefix + "fanouts:open"; }
  schedule(name: string): string { return `${this.prefix}schedule:${name}`; }
  queue(type: string, priority: number = DEFAULT_PRIORITY): string {
    return `${this.prefix}q:${type}:${priority}`;
  }
  delayed(type: string): string { return `${this.prefix}delayed:${type}`; }
  dead(type: string): string { return `${this.prefix}dead:${type}`; }
  stats(type: string): string { return `${this.prefix}stats:${type}`; }
  wake(type: string): string { return `${this.prefix}wake:${type}`; }
  unique(key: string): string { return `${this.prefix}unique:${key}`; }
  worker(id: string): string { return `${this.prefix}worker:${id}`; }
  catalog(id: string): string { return `${this.prefix}catalog:${id}`; }
  cancel(taskId: string): string { return `${this.prefix}cancel:${taskId}`; }
  inflight(workerId: string): string { return `${this.prefix}inflight:${workerId}`; }
  reply(taskId: string): string { return `${this.prefix}reply:${taskId}`; }
  fanout(id: string): string { return `${this.prefix}fanout:${id}`; }
  fanoutPending(id: string): string { return `${this.prefix}fanout:${id}:pending`; }
  fanoutDone(id: string): string { return `${this.prefix}fanout:${id}:done`; }
  fanoutResults(id: string): string { return `${this.prefix}fanout:${id}:results`; }
}
