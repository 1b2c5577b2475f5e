/**
 * The Lua scripts, loaded from the package's `lua/` folder: the output of
 * `taskscale scripts export` (every script with its includes expanded, and
 * `manifest.json`), generated when the package is built, never copied by
 * hand. Each call is EVALSHA; a NOSCRIPT reply (a Redis restart, SCRIPT
 * FLUSH) loads the script and calls it again.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import type Redis from "ioredis";

/** The schema version this client was written against (docs/schema.md). */
export const SCHEMA_VERSION = 1;

export interface ScriptInfo {
  name: string;
  file: string;
  sha1: string;
  keys: unknown[];
  argv: unknown[];
}

export interface Manifest {
  schemaVersion: number;
  scripts: Map<string, ScriptInfo & { text: string }>;
}

/** Where the exported scripts are: `TASKSCALE_LUA_DIR`, else `<package>/lua`. */
export function luaDir(): string {
  return process.env.TASKSCALE_LUA_DIR || path.join(__dirname, "..", "lua");
}

let cached: Manifest | undefined;

/** The manifest and every script's text, read once per process. */
export function manifest(dir: string = luaDir()): Manifest {
  if (cached !== undefined && dir === luaDir()) return cached;
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path.join(dir, "manifest.json"), "utf8"));
  } catch (err) {
    throw new Error(
      `taskscale: no exported Lua scripts in ${dir} (run \`taskscale scripts export ${dir}\`): ${String(err)}`,
    );
  }
  const doc = raw as Record<string, unknown>;
  const version = Number(doc.schema_version ?? doc.schemaVersion);
  if (version !== SCHEMA_VERSION) {
    throw new Error(
      `taskscale: the exported scripts are schema version ${String(doc.schema_version)}, ` +
        `this client speaks version ${SCHEMA_VERSION}`,
    );
  }
  const list: unknown[] = Array.isArray(doc.scripts)
    ? doc.scripts
    : Object.entries((doc.scripts ?? {}) as Record<string, object>).map(([name, s]) => ({ name, ...s }));
  const scripts = new Map<string, ScriptInfo & { text: string }>();
  for (const item of list) {
    const info = item as ScriptInfo;
    const text = readFileSync(path.join(dir, info.file), "utf8");
    const sha1 = createHash("sha1").update(text, "utf8").digest("hex");
    if (sha1 !== info.sha1) {
      throw new Error(`taskscale: ${info.file} does not match its SHA1 in manifest.json`);
    }
    scripts.set(info.name, { ...info, text });
  }
  const found: Manifest = { schemaVersion: version, scripts };
  if (dir === luaDir()) cached = found;
  return found;
}

function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith("NOSCRIPT");
}

/** Calls the scripts by name on one client. */
export class ScriptRunner {
  private readonly scripts: Manifest["scripts"];

  constructor(private readonly redis: Redis, dir?: string) {
    this.scripts = manifest(dir).scripts;
  }

  /** The script's SHA1 (what EVALSHA names it by). */
  sha(name: string): string {
    return this.info(name).sha1;
  }

  private info(name: string): ScriptInfo & { text: string } {
    const found = this.scripts.get(name);
    if (found === undefined) throw new Error(`taskscale: no script ${name} in the exported scripts`);
    return found;
  }

  /** EVALSHA `name` with `keys` and `args`; loads it after NOSCRIPT. */
  async run(name: string, keys: string[], args: Array<string | number>): Promise<unknown> {
    const script = this.info(name);
    const argv = args.map(String);
    try {
      return await this.redis.evalsha(script.sha1, keys.length, ...keys, ...argv);
    } catch (err) {
      if (!isNoScript(err)) throw err;
      await this.redis.script("LOAD", script.text);
      return await this.redis.evalsha(script.sha1, keys.length, ...keys, ...argv);
    }
  }
}
