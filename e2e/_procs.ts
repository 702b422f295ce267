/**
 * Background processes for the e2e cluster: started in their own session so
 * they outlive `deno task cluster up`, logged to a file, and stopped by
 * process group.
 *
 * @module
 */

/** How a component is started; recorded so that it can be started again. */
export interface ProcSpec {
  /** Component name, also the log file's base name. */
  name: string;
  /** Absolute path of the executable. */
  cmd: string;
  /** Arguments after the executable. */
  args: string[];
  /** File that receives stdout and stderr, appended to. */
  log: string;
}

/** A process started by {@linkcode spawnDetached}. */
export interface Spawned {
  pid: number;
  /** Whether it has exited; known without looking at /proc, which lags exec. */
  exited(): boolean;
}

/**
 * Starts `spec` detached (setsid, so its pid is also its process group id)
 * with stdout and stderr appended to `spec.log`.
 */
export function spawnDetached(spec: ProcSpec): Spawned {
  // Deno cannot hand a file to a child as its stdout, so a shell opens the log
  // and then execs the component, which keeps the pid the one we record.
  const child = new Deno.Command("bash", {
    args: ["-c", 'exec "$0" "$@" >>"$E2E_LOG" 2>&1', spec.cmd, ...spec.args],
    env: { E2E_LOG: spec.log },
    stdin: "null",
    stdout: "null",
    stderr: "null",
    detached: true,
  }).spawn();
  let exited = false;
  // Also reaps the child; never keeps Deno alive for it.
  child.status.then(() => exited = true, () => exited = true);
  child.unref();
  return { pid: child.pid, exited: () => exited };
}

/**
 * Reports whether `pid` is a live (not zombie) process whose command line
 * contains `marker`, so that a recycled pid is never mistaken for ours. Only
 * for processes another run started: right after a spawn, /proc may still
 * show the parent's command line.
 */
export function isAlive(pid: number, marker: string): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    // The state follows the parenthesised command name, which may hold spaces.
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    if (state === "Z" || state === "X") return false;
    const cmdline = Deno.readTextFileSync(`/proc/${pid}/cmdline`).replaceAll("\0", " ");
    return cmdline.includes(marker);
  } catch {
    return false;
  }
}

/**
 * Stops the process groups of those `pids` that `alive` accepts: SIGTERM,
 * then SIGKILL for any still alive after `graceMs`.
 */
export async function killGroups(
  pids: number[],
  alive: (pid: number) => boolean,
  graceMs = 10_000,
): Promise<void> {
  const ours = pids.filter(alive);
  for (const pid of ours) signalGroup(pid, "SIGTERM");
  const deadline = Date.now() + graceMs;
  while (ours.some(alive) && Date.now() < deadline) await delay(50);
  for (const pid of ours.filter(alive)) signalGroup(pid, "SIGKILL");
  while (ours.some(alive)) await delay(50);
}

function signalGroup(pid: number, signal: Deno.Signal): void {
  try {
    Deno.kill(-pid, signal);
  } catch {
    // The group ended between the check and the signal; the wait loop notices
    // any survivor.
  }
}

/** Resolves after `ms` milliseconds. */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Returns the last `lines` lines of the file at `path`, or "" if unreadable. */
export async function tail(path: string, lines: number): Promise<string> {
  try {
    const text = await Deno.readTextFile(path);
    return text.trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "";
  }
}

/** Returns `count` distinct TCP ports on 127.0.0.1 that were free a moment ago. */
export function freePorts(count: number): number[] {
  // Holding all listeners until every port is chosen keeps them distinct.
  const listeners = Array.from(
    { length: count },
    () => Deno.listen({ hostname: "127.0.0.1", port: 0 }),
  );
  const ports = listeners.map((l) => (l.addr as Deno.NetAddr).port);
  for (const l of listeners) l.close();
  return ports;
}
