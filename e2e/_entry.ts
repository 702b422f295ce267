/**
 * How the suites and `deno task cluster hook` start the dispatcher: the
 * permissions of the `dispatch` task, and which entry point. Imports nothing
 * of the suites, so that e2e/cluster.ts may use it.
 *
 * @module
 */

const ROOT = new URL("../", import.meta.url).pathname;

/**
 * The `deno run` permission and V8 flags of the `dispatch` task in deno.json,
 * read from there so that the suite runs with exactly what the binary gets.
 */
export function dispatchPermissions(): string[] {
  const config = JSON.parse(Deno.readTextFileSync(`${ROOT}deno.json`));
  const task: string = config.tasks.dispatch;
  // The V8 flags too: the binary is compiled with them.
  return task.split(/\s+/).filter((w) => /^--(allow-|v8-flags=)/.test(w));
}

/**
 * What runs: `main.ts` from source by default, or the bundle named by
 * `$JOB_DISPATCHER_ENTRY` (e.g. dist/job-dispatcher.js), with the same permissions.
 */
export function dispatcherCommand(): string[] {
  const entry = Deno.env.get("JOB_DISPATCHER_ENTRY") ?? `${ROOT}main.ts`;
  return ["run", "--quiet", ...dispatchPermissions(), entry];
}
