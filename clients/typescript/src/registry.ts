/**
 * The typed task registry: which function runs each task type, with its
 * declared options (the defaults a producer's envelope fields override).
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { Kwargs } from "./envelope";
import { TaskOptions } from "./options";

export type TaskFunction = (...args: any[]) => unknown;

export interface RegisterOptions {
  /** Declared defaults: maxRetries, retryBackoff, retryBackoffMax, timeout, resultTtl. */
  options?: TaskOptions;
  /** Pass the envelope's kwargs as one last argument (an object). Without it a
   * task given kwargs is dead-lettered with a TypeError, as an argument
   * mismatch is in Python. */
  kwargs?: boolean;
  /** For the catalog: one line on what it does. */
  doc?: string;
  /** For the catalog: parameter names (in order). */
  params?: string[];
  /** For the catalog: the return type, as text. */
  returns?: string;
}

export interface TaskDefinition extends RegisterOptions {
  type: string;
  fn: TaskFunction;
}

/** Maps task types to functions; its type parameter records them, so a
 * `Client<RegistryMap<typeof registry>>` checks arguments at compile time. */
export class TaskRegistry<M extends Record<string, TaskFunction> = {}> {
  private readonly tasks = new Map<string, TaskDefinition>();

  /** Register `fn` for `type` (replacing an earlier one). */
  register<K extends string, F extends TaskFunction>(type: K, fn: F, opts: RegisterOptions = {}): TaskRegistry<M & Record<K, F>> {
    this.tasks.set(type, { ...opts, type, fn });
    return this as unknown as TaskRegistry<M & Record<K, F>>;
  }

  get(type: string): TaskDefinition | undefined {
    return this.tasks.get(type);
  }

  types(): string[] {
    return [...this.tasks.keys()];
  }
}

/** The task map a registry was built with. */
export type RegistryMap<R> = R extends TaskRegistry<infer M> ? M : never;

/** What a running task can ask about itself (`currentTask()`). */
export interface TaskContext {
  id: string;
  type: string;
  workerId: string;
  /** 1 for the first run, 2 for the first retry, ... */
  attempt: number;
  kwargs: Kwargs;
  /** Aborted when the run's timeout passes. */
  signal: AbortSignal;
  /** True once `cancel(id)` flagged this running task. */
  isCancelled(): Promise<boolean>;
}

export const taskStorage = new AsyncLocalStorage<TaskContext>();

/** The task this code runs for (inside a task function), else undefined. */
export function currentTask(): TaskContext | undefined {
  return taskStorage.getStore();
}
