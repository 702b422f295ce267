/**
 * Headless Chromium (Debian's `chromium` package) driven over the DevTools
 * protocol: opens a page, and says what it logged, what it requested and
 * what a script reads from it, and takes a screenshot. For the HTML
 * timeline's check: one row per node, no console error, no network request.
 *
 * @module
 */

/** What a page did while it was open. */
export interface PageReport {
  /** Console errors, uncaught exceptions and error log entries. */
  errors: string[];
  /** URLs requested besides the page itself. */
  requests: string[];
  /** The value of `expression`, evaluated after load. */
  value: unknown;
  /** A PNG screenshot of the viewport. */
  png: Uint8Array;
}

/** The Chromium binary, or undefined when it is not installed. */
export function chromiumPath(): string | undefined {
  return ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find(exists);
}

/**
 * The Chromium binary, installed from Debian's package first when it is
 * missing and this machine can (root, apt-get), as the suites build the
 * control plane they need: a fresh machine runs the tests with no step
 * before them. Undefined when it cannot be installed.
 */
export async function ensureChromium(): Promise<string | undefined> {
  const found = chromiumPath();
  if (found || Deno.uid() !== 0 || !exists("/usr/bin/apt-get")) return found;
  console.error("installing Debian's chromium (apt-get) for the HTML timeline's check");
  const env = { ...Deno.env.toObject(), DEBIAN_FRONTEND: "noninteractive" };
  for (const args of [["update", "-qq"], ["install", "-y", "-qq", "chromium"]]) {
    const r = await new Deno.Command("apt-get", { args, env, stdout: "null", stderr: "piped" })
      .output();
    if (!r.success) {
      console.error(`apt-get ${args.join(" ")}: ${new TextDecoder().decode(r.stderr)}`);
      return undefined;
    }
  }
  return chromiumPath();
}

function exists(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

/** A DevTools session over one WebSocket. */
class Cdp {
  #ws: WebSocket;
  #id = 0;
  #calls = new Map<number, (r: { result?: unknown; error?: unknown }) => void>();
  #listeners: ((method: string, params: Record<string, unknown>) => void)[] = [];

  constructor(ws: WebSocket) {
    this.#ws = ws;
    ws.onmessage = (m) => {
      const msg = JSON.parse(m.data as string);
      if (msg.id !== undefined) this.#calls.get(msg.id)?.(msg);
      else for (const l of this.#listeners) l(msg.method, msg.params ?? {});
    };
  }

  static async open(url: string): Promise<Cdp> {
    const ws = new WebSocket(url);
    await new Promise((resolve, reject) => {
      ws.onopen = resolve;
      ws.onerror = reject;
    });
    return new Cdp(ws);
  }

  on(l: (method: string, params: Record<string, unknown>) => void): void {
    this.#listeners.push(l);
  }

  // deno-lint-ignore no-explicit-any
  send(method: string, params: Record<string, unknown> = {}): Promise<any> {
    const id = ++this.#id;
    this.#ws.send(JSON.stringify({ id, method, params }));
    return new Promise((resolve, reject) =>
      this.#calls.set(
        id,
        (r) => (r.error ? reject(new Error(JSON.stringify(r.error))) : resolve(r.result)),
      )
    );
  }

  close(): void {
    this.#ws.close();
  }
}

/** Starts Chromium headless and returns its DevTools port and the process. */
async function launch(bin: string, dir: string) {
  const child = new Deno.Command(bin, {
    args: [
      "--headless=new",
      "--no-sandbox",
      "--disable-gpu",
      "--no-first-run",
      "--remote-debugging-port=0",
      `--user-data-dir=${dir}`,
      "about:blank",
    ],
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let text = "";
  let found!: (port: number) => void;
  const port = new Promise<number>((resolve) => (found = resolve));
  // Read stderr to its end: a full pipe would stall the browser.
  const drained = (async () => {
    for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) {
      text += chunk;
      const m = text.match(/DevTools listening on ws:\/\/[^:]+:(\d+)\//);
      if (m) found(Number(m[1]));
    }
  })();
  const ended = drained.then(() => {
    throw new Error(`chromium did not start: ${text}`);
  });
  return { child, port: await Promise.race([port, ended]) };
}

/**
 * Opens `file` in headless Chromium at 1280×720, waits for its load and a
 * frame, evaluates `expression`, and reports.
 */
export async function openPage(bin: string, file: string, expression: string): Promise<PageReport> {
  const dir = await Deno.makeTempDir({ prefix: "chromium-" });
  const { child, port } = await launch(bin, dir);
  try {
    const target =
      await (await fetch(`http://127.0.0.1:${port}/json/new?about:blank`, { method: "PUT" }))
        .json();
    const cdp = await Cdp.open(target.webSocketDebuggerUrl);
    const errors: string[] = [], requests: string[] = [];
    const url = `file://${file}`;
    let loaded!: () => void;
    const load = new Promise<void>((r) => (loaded = r));
    cdp.on((method, p) => {
      // deno-lint-ignore no-explicit-any
      const q = p as any;
      if (method === "Runtime.consoleAPICalled" && q.type === "error") {
        errors.push(`console.error: ${q.args.map((a: { value?: unknown }) => a.value).join(" ")}`);
      } else if (method === "Runtime.exceptionThrown") {
        errors.push(
          `exception: ${q.exceptionDetails.exception?.description ?? q.exceptionDetails.text}`,
        );
      } else if (method === "Log.entryAdded" && q.entry.level === "error") {
        errors.push(`log: ${q.entry.text}`);
      } else if (method === "Network.requestWillBeSent" && q.request.url !== url) {
        requests.push(q.request.url);
      } else if (method === "Page.loadEventFired") loaded();
    });
    for (const domain of ["Runtime", "Log", "Network", "Page"]) await cdp.send(`${domain}.enable`);
    await cdp.send("Emulation.setDeviceMetricsOverride", {
      width: 1280,
      height: 720,
      deviceScaleFactor: 1,
      mobile: false,
    });
    await cdp.send("Page.navigate", { url });
    await load;
    await new Promise((r) => setTimeout(r, 500));
    const value = (await cdp.send("Runtime.evaluate", { expression, returnByValue: true })).result
      .value;
    const shot = await cdp.send("Page.captureScreenshot", { format: "png" });
    cdp.close();
    const png = Uint8Array.from(atob(shot.data), (c) => c.charCodeAt(0));
    return { errors, requests, value, png };
  } finally {
    child.kill("SIGKILL");
    await child.status;
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}
