/** taskscale's TypeScript client: producer, RPC, fan-out, admin calls and a worker. */
export { Client, ClientOptions } from "./client";
export { Worker, WorkerSettings } from "./worker";
export { TaskRegistry, RegistryMap, RegisterOptions, TaskContext, currentTask } from "./registry";
export { Call, EnvelopeError, PayloadTooLarge, newTaskId } from "./envelope";
export { EnqueueOptions, TaskMap } from "./producer";
export { CallOptions, RemoteError, TaskTimeout, NoLiveWorker, RpcHandle } from "./rpc";
export { ArgSet, FanoutHandle, FanoutStream, FanoutResult, FanoutStatus, FanoutTimeout, FanoutClosed, UnknownFanout, SubResult, unwrapSub } from "./fanout";
export { CancelResult, Limits, ScheduleOptions, ScheduleInfo, parseRate } from "./admin";
export { TaskOptions } from "./options";
export { Keys, Priority, parsePriority, PRIORITY_NAMES } from "./keys";
export { RetryPolicy, RunTimeout, backoffMs, resolve as resolveOptions } from "./execution";
export { SCHEMA_VERSION, manifest } from "./scripts";
export { connect } from "./connection";
