/**
 * The example tasks of taskscale/examples.py, in TypeScript, with the same
 * types and results (`taskscale-ts-worker --import dist/examples.js`):
 * noop, sleep, echo and fail, so a fleet may mix Python and TypeScript
 * workers of one type.
 */
import { Kwargs } from "./envelope";
import { TaskRegistry } from "./registry";

/** Raised by the `fail` task, on purpose. */
export class ExampleFailure extends Error {
  override name = "ExampleFailure";
}

export const registry = new TaskRegistry()
  .register("noop", (..._args: unknown[]) => null, { kwargs: true, doc: "Does nothing: measures the runtime's own overhead." })
  .register(
    "sleep",
    async (seconds: number | Kwargs = 1.0, kwargs: Kwargs = {}) => {
      // sleep(2) from positional args, or sleep(seconds=2) from a Python caller's kwargs
      const s = Number(typeof seconds === "object" ? (seconds.seconds ?? 1.0) : (kwargs.seconds ?? seconds));
      await new Promise((resolve) => setTimeout(resolve, s * 1000));
      return s;
    },
    { kwargs: true, params: ["seconds"], returns: "number", doc: "Holds a slot for `seconds` (a stand-in for I/O-bound work)." },
  )
  .register(
    "echo",
    (...all: unknown[]) => {
      const kwargs = all.pop() as Kwargs;
      return { args: all, kwargs };
    },
    { kwargs: true, doc: "Returns its arguments (RPC round trips)." },
  )
  .register(
    "fail",
    (message: unknown = "failed on purpose", kwargs: Kwargs = {}) => {
      const text = typeof message === "object" && message !== null ? (message as Kwargs).message : (kwargs.message ?? message);
      throw new ExampleFailure(String(text ?? "failed on purpose"));
    },
    { kwargs: true, params: ["message"], doc: "Always raises (retries and dead letters)." },
  );

export default registry;
