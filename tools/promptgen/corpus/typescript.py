"""TypeScript snippets: debounce, deep merge, query strings, a typed event emitter, grouping, fetch
with retries."""

# Snippet code is source text kept verbatim; some of its lines are longer than the house limit.
# ruff: noqa: E501
from __future__ import annotations

from tools.promptgen.model import Bug, Snippet

TYPESCRIPT: tuple[Snippet, ...] = (
    Snippet(
        "ts_debounce", "typescript", "debounce",
        "delays calls to a function until a quiet period has passed, with a cancel method",
        "Write a TypeScript function `debounce<A extends unknown[]>(fn: (...args: A) => void, "
        "waitMs: number)` that returns a debounced function: each call restarts a timer and `fn` "
        "runs once, with the latest arguments, after `waitMs` ms without calls. The returned "
        "function must also have a `cancel()` method that drops a pending call.",
        r'''export interface Debounced<A extends unknown[]> {
  (...args: A): void;
  cancel(): void;
}

export function debounce<A extends unknown[]>(fn: (...args: A) => void, waitMs: number): Debounced<A> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const debounced = ((...args: A) => {
    if (timer !== undefined) {
      clearTimeout(timer);
    }
    timer = setTimeout(() => {
      timer = undefined;
      fn(...args);
    }, waitMs);
  }) as Debounced<A>;
  debounced.cancel = () => {
    if (timer !== undefined) {
      clearTimeout(timer);
      timer = undefined;
    }
  };
  return debounced;
}
''',
        {"debounce": ("debounced", "quietCall", "settle"), "waitMs": ("delayMs", "quietMs")},
        (Bug("    if (timer !== undefined) {\n      clearTimeout(timer);\n    }\n    timer = setTimeout",
             "    timer = setTimeout",
             "FAIL src/debounce.test.ts\n  ● debounce › calls fn once after a burst\n\n"
             "    expect(jest.fn()).toHaveBeenCalledTimes(expected)\n\n    Expected number of calls: 1\n"
             "    Received number of calls: 3\n\n      at Object.<anonymous> (src/debounce.test.ts:17:20)"),),
        (),
    ),
    Snippet(
        "ts_deep_merge", "typescript", "deepMerge",
        "recursively merges plain objects, with arrays and primitives from the override winning",
        "Write `deepMerge<T extends Record<string, unknown>>(base: T, override: Partial<T>): T` in "
        "TypeScript. Plain objects are merged recursively; arrays, primitives and null in "
        "`override` replace the base value; undefined in `override` is ignored. Neither input may "
        "be mutated.",
        r'''type Plain = Record<string, unknown>;

function isPlainObject(value: unknown): value is Plain {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function deepMerge<T extends Plain>(base: T, override: Partial<T>): T {
  const result: Plain = { ...base };
  for (const [key, value] of Object.entries(override)) {
    if (value === undefined) {
      continue;
    }
    const current = result[key];
    result[key] = isPlainObject(current) && isPlainObject(value) ? deepMerge(current, value) : value;
  }
  return result as T;
}
''',
        {"deepMerge": ("mergeDeep", "mergeConfig", "overlay"), "override": ("patch", "overrides")},
        (Bug("    if (value === undefined) {\n      continue;\n    }\n", "",
             "FAIL src/merge.test.ts\n  ● deepMerge › ignores undefined overrides\n\n"
             "    expect(received).toEqual(expected) // deep equality\n\n"
             "    - Expected  - 1\n    + Received  + 1\n\n      Object {\n    -   \"port\": 8080,\n"
             "    +   \"port\": undefined,\n      }"),),
        (("deepMerge({ a: { b: 1 } }, { a: { c: 2 } } as any)", "{ a: { b: 1, c: 2 } }"),
         ("deepMerge({ a: 1 }, {})", "{ a: 1 }")),
    ),
    Snippet(
        "ts_query_string", "typescript", "parseQuery",
        "parses a URL query string into a map of string arrays, decoding percent escapes and '+'",
        "Write `parseQuery(query: string): Map<string, string[]>` in TypeScript. Accept an optional "
        "leading '?', split on '&', decode '+' as a space and percent escapes with "
        "decodeURIComponent, keep repeated keys as several values in order, and treat a key "
        "without '=' as having the empty string as its value. Skip empty segments.",
        r'''export function parseQuery(query: string): Map<string, string[]> {
  const params = new Map<string, string[]>();
  const body = query.startsWith("?") ? query.slice(1) : query;
  for (const segment of body.split("&")) {
    if (segment === "") {
      continue;
    }
    const eq = segment.indexOf("=");
    const rawKey = eq === -1 ? segment : segment.slice(0, eq);
    const rawValue = eq === -1 ? "" : segment.slice(eq + 1);
    const key = decodeURIComponent(rawKey.replace(/\+/g, " "));
    const value = decodeURIComponent(rawValue.replace(/\+/g, " "));
    const values = params.get(key) ?? [];
    values.push(value);
    params.set(key, values);
  }
  return params;
}
''',
        {"parseQuery": ("parseSearchParams", "decodeQuery", "readQuery")},
        (Bug("segment.slice(eq + 1)", "segment.slice(eq)",
             "FAIL src/query.test.ts\n  ● parseQuery › reads a single pair\n\n"
             "    expect(received).toEqual(expected)\n\n    Expected: [\"1\"]\n    Received: [\"=1\"]"),),
        (("parseQuery(\"?a=1&a=2\").get(\"a\")", "[\"1\", \"2\"]"), ("parseQuery(\"\").size", "0")),
    ),
    Snippet(
        "ts_event_emitter", "typescript", "TypedEmitter",
        "is a small typed event emitter with on/off/once and safe emission order",
        "Implement a TypeScript class `TypedEmitter<Events extends Record<string, unknown[]>>` "
        "with `on(event, listener)` returning an unsubscribe function, `once(event, listener)`, "
        "`off(event, listener)` and `emit(event, ...args)` returning the number of listeners "
        "called. Listeners added during an emit must not run in that emit.",
        r'''type Listener<A extends unknown[]> = (...args: A) => void;

export class TypedEmitter<Events extends Record<string, unknown[]>> {
  private listeners = new Map<keyof Events, Set<Listener<any>>>();

  on<E extends keyof Events>(event: E, listener: Listener<Events[E]>): () => void {
    let set = this.listeners.get(event);
    if (!set) {
      set = new Set();
      this.listeners.set(event, set);
    }
    set.add(listener);
    return () => this.off(event, listener);
  }

  once<E extends keyof Events>(event: E, listener: Listener<Events[E]>): () => void {
    const wrapper: Listener<Events[E]> = (...args) => {
      this.off(event, wrapper);
      listener(...args);
    };
    return this.on(event, wrapper);
  }

  off<E extends keyof Events>(event: E, listener: Listener<Events[E]>): void {
    this.listeners.get(event)?.delete(listener);
  }

  emit<E extends keyof Events>(event: E, ...args: Events[E]): number {
    const snapshot = [...(this.listeners.get(event) ?? [])];
    for (const listener of snapshot) {
      listener(...args);
    }
    return snapshot.length;
  }
}
''',
        {"TypedEmitter": ("EventBus", "Emitter", "SignalHub")},
        (Bug("      this.off(event, wrapper);\n      listener(...args);", "      listener(...args);",
             "FAIL src/emitter.test.ts\n  ● TypedEmitter › once listeners run a single time\n\n"
             "    expect(jest.fn()).toHaveBeenCalledTimes(expected)\n\n    Expected number of calls: 1\n"
             "    Received number of calls: 2"),),
        (),
    ),
    Snippet(
        "ts_group_by", "typescript", "groupBy",
        "groups array items into a record keyed by a selector",
        "Write a generic TypeScript function `groupBy<T, K extends string | number>(items: "
        "readonly T[], keyOf: (item: T) => K): Record<K, T[]>` that keeps the input order inside "
        "each group and does not mutate the input.",
        r'''export function groupBy<T, K extends string | number>(items: readonly T[], keyOf: (item: T) => K): Record<K, T[]> {
  const groups = {} as Record<K, T[]>;
  for (const item of items) {
    const key = keyOf(item);
    if (!(key in groups)) {
      groups[key] = [];
    }
    groups[key].push(item);
  }
  return groups;
}
''',
        {"groupBy": ("bucketBy", "indexBy", "partitionBy"), "keyOf": ("selector", "getKey")},
        (Bug("if (!(key in groups))", "if (key in groups)",
             "FAIL src/group.test.ts\n  ● groupBy › groups words by length\n\n"
             "    TypeError: Cannot read properties of undefined (reading 'push')\n\n"
             "      at groupBy (src/{file}:{line}:19)"),),
        (("groupBy([\"a\", \"bb\", \"c\"], (s) => s.length)", "{ 1: [\"a\", \"c\"], 2: [\"bb\"] }"),),
    ),
    Snippet(
        "ts_fetch_retry", "typescript", "fetchJson",
        "fetches JSON with a timeout and retries on network errors and 5xx responses",
        "Write an async TypeScript function `fetchJson<T>(url: string, options: { timeoutMs?: "
        "number; retries?: number } = {}): Promise<T>` using the global fetch and AbortController. "
        "Retry network errors and 5xx responses up to `retries` times with a 200 ms * attempt "
        "delay; throw an Error that includes the status for 4xx responses without retrying.",
        r'''export class HttpError extends Error {
  constructor(public readonly status: number, url: string) {
    super(`GET ${url} failed with status ${status}`);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function fetchJson<T>(url: string, options: { timeoutMs?: number; retries?: number } = {}): Promise<T> {
  const { timeoutMs = 5000, retries = 2 } = options;
  for (let attempt = 0; ; attempt++) {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), timeoutMs);
    try {
      const response = await fetch(url, { signal: controller.signal });
      if (response.status >= 400 && response.status < 500) {
        throw new HttpError(response.status, url);
      }
      if (!response.ok) {
        throw new Error(`server error ${response.status}`);
      }
      return (await response.json()) as T;
    } catch (err) {
      if (err instanceof HttpError || attempt >= retries) {
        throw err;
      }
      await sleep(200 * (attempt + 1));
    } finally {
      clearTimeout(timer);
    }
  }
}
''',
        {"fetchJson": ("getJson", "requestJson", "loadJson"), "retries": ("maxRetries", "attempts")},
        (Bug("if (err instanceof HttpError || attempt >= retries)", "if (attempt >= retries)",
             "FAIL src/http.test.ts (6.2 s)\n  ● fetchJson › does not retry a 404\n\n"
             "    expect(jest.fn()).toHaveBeenCalledTimes(expected)\n\n    Expected number of calls: 1\n"
             "    Received number of calls: 3"),),
        (),
    ),
)
