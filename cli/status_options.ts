/**
 * The command line of `job-dispatcher status`: its flags, its manual, and
 * the {@linkcode StatusConfig} they make. The flags that name a run and the
 * cluster mean what they mean for a run (and to kubectl).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { UsageError } from "../job.ts";
import { describeFlagError, type FlagSpec, switchValues } from "./flag_errors.ts";
import type { StatusConfig } from "../status/status.ts";

/** The manual printed by `status --help`. */
export const STATUS_HELP = `job-dispatcher status: a rollout seen from anywhere.

USAGE
  job-dispatcher status (--name-prefix P | --owner-job-name JOB) [-n NS] [flags]

  Reads the cluster only (the run record ConfigMap run-record.<P>, the Jobs,
  the nodes' marks and cordons) and prints: whether the run lives, ended or
  is gone (killed: then what a re-run would adopt), paused and by what, the
  open wave and its stage (running, soaking with the soak left, holding for
  the gates), the health gates' state (ok, waiting, Prometheus unreachable,
  no data with the dark selector, breached with the query and how to lift
  its latch; when last checked), the window, rate and ETA (none while paused
  or after a stop),
  counts per phase, the nodes in flight (age, phase),
  the failed ones with their reasons, the blocked ones with their pods.
  Read-only RBAC is enough: get/list on jobs and configmaps in NS, list on
  nodes (the chart's viewer role).

FLAGS
  --name-prefix P           The run's Job name prefix.
  --owner-job-name JOB      The run's owner Job (its record is found by label).
  -n, --namespace NS        Namespace of the Jobs (as for a run).
  --tracking-label-prefix T The run's tracking label prefix. Default: job-dispatcher.
  -o, --output FORMAT       text (default), wide (more columns, every node) or json
                            ({nodes: [{node, phase, job, reason, ...}], counts, run
                            {..., etaSecs, wave {wave, waves, stage, soakLeftSecs},
                            gates {state, queries, checkedAt, detail, lift}}}).
  -w, --watch               Read again every 2 s and print the view when it changes
                            (a node's phase, a pause, a wave's stage, the gates'
                            state; not the ages).
  --require-ended           Exit 1 also while the run still lives or is paused: it has
                            not worked yet (what the chart's helm test asks).
  --kubeconfig PATH         As for kubectl.
  --context NAME            As for kubectl.
  -h, --help                This text.

EXIT CODES
  0  nothing failed (and, once the run ended, every node succeeded)
  1  a node failed, or the run ended or died with nodes not succeeded (a
     node left finishing: its verification, labels or uncordon never ran),
     or (--require-ended) it still lives
  2  bad input: no prefix or owner, no such run, an unknown flag
  3  the cluster cannot be reached or refuses a read
`;

/** Every flag of `status`, in parseArgs form: what {@linkcode STATUS_HELP} documents. */
export const STATUS_FLAGS = {
  "name-prefix": { type: "string" },
  "owner-job-name": { type: "string" },
  namespace: { type: "string", short: "n" },
  "tracking-label-prefix": { type: "string" },
  output: { type: "string", short: "o" },
  watch: { type: "boolean", short: "w" },
  "require-ended": { type: "boolean" },
  kubeconfig: { type: "string" },
  context: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

/** Status' configuration and whether `--help` was asked. */
export interface StatusOptions extends StatusConfig {
  /** Print the manual. */
  help: boolean;
}

/**
 * Parses the arguments after `status`.
 *
 * @throws {UsageError} naming the flag and what is wrong with it
 * @example
 * ```ts
 * parseStatusOptions(["--name-prefix", "up", "-o", "json"]).output; // "json"
 * ```
 */
export function parseStatusOptions(argv: string[]): StatusOptions {
  let v;
  try {
    const args = switchValues(argv, STATUS_FLAGS as Record<string, FlagSpec>);
    v = parseArgs({ args, options: STATUS_FLAGS, strict: true, allowPositionals: false }).values;
  } catch (e) {
    const flags = STATUS_FLAGS as Record<string, FlagSpec>;
    throw new UsageError(
      describeFlagError((e as Error).message, { argv, flags, help: STATUS_HELP }),
    );
  }
  const output = v.output ?? "text";
  if (!["text", "wide", "json"].includes(output)) {
    throw new UsageError(`Invalid --output ${output}: write -o text, -o wide or -o json`);
  }
  if (v["name-prefix"] !== undefined && v["owner-job-name"] !== undefined) {
    throw new UsageError(
      "Invalid --name-prefix with --owner-job-name: name the run one way (the owner finds its prefix)",
    );
  }
  return {
    help: v.help ?? false,
    namespace: v.namespace,
    prefix: v["name-prefix"],
    ownerJobName: v["owner-job-name"],
    trackingLabelPrefix: v["tracking-label-prefix"] ?? "job-dispatcher",
    output: output as StatusConfig["output"],
    watch: v.watch ?? false,
    watchIntervalSecs: 2,
    requireEnded: v["require-ended"] ?? false,
    kubeconfig: v.kubeconfig,
    context: v.context,
  };
}
