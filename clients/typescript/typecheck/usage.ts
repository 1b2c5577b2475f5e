// The examples of docs/clients.md, type-checked against the emitted
// declarations (tests/clients/test_ts_package.py runs tsc --noEmit here).
// Each @ts-expect-error line is a mistake the types must catch.
import { Call, Client, RegistryMap, TaskRegistry, Worker, currentTask } from "taskscale";

type Tasks = {
  resize: (url: string, width: number) => string;
  report: (day: string) => void;
};

export async function producing(): Promise<void> {
  const client = new Client<Tasks>({ url: "redis://127.0.0.1:6379/0" });
  const id: string = await client.enqueue("resize", ["https://x/y.png", 640], {
    priority: "high",
    delay: 30,
    uniqueKey: "resize:y.png",
    uniqueFor: 60,
    options: { maxRetries: 5, retryBackoff: [1, 5, 30], retryBackoffMax: 600, timeout: 20, resultTtl: 300 },
    kwargs: { quality: 80 },
  });
  await client.enqueueMany("report", [["2026-11-01"], ["2026-11-02"], new Call(["2026-11-03"], { late: true })]);
  const url: string = await client.call("resize", ["https://x/y.png", 640], { timeout: 10 });
  const handle = await client.callAsync("resize", ["https://x/z.png", 320]);
  await handle.get(30);
  client.rpcHandle(handle.id, "resize");
  const fan = await client.submitFanout("resize", [["a.png", 64], ["b.png", 64]], { limit: 10 });
  const done = await fan.wait(60);
  const stream = await client.openFanout("resize", { limit: 10, collect: true });
  await stream.add([["c.png", 64]]);
  await stream.close();
  const { results } = await stream.wait(60, { collect: true });
  await client.cancel(id);
  await client.setLimits("resize", { rate: "100/s", burst: 5, concurrency: 20 });
  await client.schedule("nightly", "report", ["today"], { cron: "0 3 * * *", tz: "Europe/Berlin" });
  await client.schedule("tick", "report", ["now"], { every: 60, options: { maxRetries: 1 } });
  // @ts-expect-error: width must be a number
  await client.enqueue("resize", ["https://x/y.png", "wide"]);
  // @ts-expect-error: no such task type
  await client.enqueue("rezise", ["https://x/y.png", 640]);
  // @ts-expect-error: priority names are high / normal / low
  await client.enqueue("report", ["d"], { priority: "urgent" });
  void [url, done.total, results?.length];
  await client.close();
}

export const registry = new TaskRegistry()
  .register("resize", async (url: string, width: number) => `${url}@${width}`, {
    options: { maxRetries: 5, timeout: 20 },
    doc: "Resizes one image.",
    params: ["url", "width"],
    returns: "string",
  })
  .register("report", async (day: string, kwargs: { late?: boolean }) => {
    if (await currentTask()!.isCancelled()) return null;
    return { day, late: kwargs.late ?? false };
  }, { kwargs: true });

export async function serving(): Promise<number> {
  const client = new Client<RegistryMap<typeof registry>>();
  const width: string = await client.call("resize", ["u", 3]);
  // @ts-expect-error: the registry's resize takes (string, number)
  await client.call("resize", [3, "u"]);
  void width;
  const worker = new Worker(registry, { concurrency: 8 });
  worker.installSignalHandlers();
  return worker.run();
}
