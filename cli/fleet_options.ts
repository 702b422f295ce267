/**
 * `job-dispatcher fleet …` on the command line: `-f FLEET.yaml`, for
 * `approve` the stage, and the run flags (cli/options.ts), which apply to
 * every cluster of the fleet.
 *
 * @module
 */

import { UsageError } from "../job.ts";
import { type Options, parseOptions } from "./options.ts";

/** `job-dispatcher fleet --help`. */
export const FLEET_HELP = `job-dispatcher fleet: one rollout across many clusters, in stages.

USAGE
  job-dispatcher fleet -f FLEET.yaml --job-template PATH [run flags]
  job-dispatcher fleet approve -f FLEET.yaml STAGE --job-template PATH [run flags]
  job-dispatcher fleet status -f FLEET.yaml --job-template PATH [run flags] [-o json]

  Each cluster is a kubeconfig context. Stages run in order; a stage's
  clusters are rolled out with the run flags (the same run as
  job-dispatcher's, with its record in that cluster), at most
  maxParallelClusters at once. The next stage starts once every cluster of
  the stage ended, its soakSecs passed (from the latest recorded end) with
  the --gate-* of every cluster so far clean (a breach, an outage or no
  data restarts the soak), and, with approval: true, "fleet approve"
  recorded the approval in each of the next stage's clusters (for this
  template; who approved is the API server's whoami).

  Stop-the-line: the first cluster that stops (a gate breach, the failure
  budget, as they happen; a non-zero exit) lets no further cluster start.
  The clusters in flight are held as a breach holds a run: with
  --pause-file the fleet latches it (no Job starts until a person removes
  it); with --on-gate-breach exit or without a pause file they create no
  further Job and their Jobs in flight finish. The fleet exits once every
  run ended, with the stopping run's exit code (5 for a breach).

  Before the first Job anywhere, every cluster is reached and its API
  server checks the template in its namespace (a dry-run create). An API
  outage of one cluster pauses that cluster's run only. A re-run of the
  same command (after a crash, kill -9) counts each cluster whose run
  record says its rollout of this template ended cleanly, honours a
  stage's soak from its recorded end, and resumes the rest. A run that
  exits 0 without rolling out (it yielded to a live run) stops the line,
  exit 1.

  One fleet process at a time: a lease (ConfigMap fleet-lease.<prefix> in
  each cluster, renewed every 5 s) is taken before the first write; a second
  process finding a live one says who holds it and exits 3, creating
  nothing. A lease not renewed for 15 s, or whose process on this host is
  gone (kill -9), is taken over.

  "fleet status" reads the same records and approvals (read-only: configmaps
  get in each cluster): one row per cluster (stage, phase, nodes succeeded /
  failed / total, ETA, pause or stop), the fleet's stage and what it
  waits for (its clusters, a soak, an approval, a stopped line), and the
  whole fleet's ETA: the soak left, the stage in flight (its runs' ETAs)
  and the stages after it (each cluster as long as the ended ones took),
  approvals' waits not counted. No number while a cluster is paused or the
  line is stopped: it says "paused (…)" or "stopped (…)". Exit 3 when a
  cluster could not be read. It also names the process holding the lease.

FLEET.yaml
  stages:
    - name: canary               # lower-case letters, digits, "-"
      clusters: [dev-eu1]        # kubeconfig context names
      soakSecs: 1800             # default 0
    - name: eu
      clusters: [prod-eu1, prod-eu2]
      maxParallelClusters: 1     # default: the whole stage at once
      approval: true             # waits for "fleet approve -f FLEET.yaml eu"
  clusters:                      # optional, per context
    prod-eu2: { kubeconfig: ~/.kube/eu2.yaml, namespace: ops,
                gatePrometheusUrl: "http://prom.eu2:9090" }  # needs the --gate-* flags
                                 # a relative kubeconfig: from FLEET.yaml's folder

  An unknown key, a cluster in two stages, an empty stage, a context the
  kubeconfig lacks: one line naming it, exit 2, nothing created anywhere. A
  cluster that does not answer at start: exit 3 naming it.

FLAGS
  -f, --fleet-file PATH     The fleet (required).
  -o, --output text|json    How "fleet status" prints. Default: text.
  Run flags: as job-dispatcher's (job-dispatcher --help), for every cluster;
  --report PATH is written once per cluster, as PATH with the context's
  name before its ending; with --report-format json, PATH itself is the
  fleet's report: the order, who stopped the line and why, and one section
  per cluster (its report); with html, PATH is one timeline with a lane per
  cluster in stage order (its nodes' rows, pauses, soaks, breaches), a line
  where each stage started and the wait between stages shaded; with junit,
  PATH is one document of every cluster's suites in stage order, each
  suite's name and classname naming its cluster. Not taken here: --context (FLEET.yaml names the
  contexts), --metrics-addr (not built for fleets yet).
  --dry-run=plan|client|server  Each cluster's dry run in stage order, each
                            headed by "# cluster C (stage S)" after the
                            fleet's order; no wait, nothing created. With
                            --dry-run=plan -o json: one document, the stages
                            and each cluster's plan. --dry-run=plan ends
                            with the fleet's ETA (with --estimate-from:
                            the clusters' estimates, maxParallelClusters at
                            once, plus the soaks).
  -h, --help                This text.
`;

/** A parsed `fleet` command line. */
export interface FleetOptions {
  /** `fleet` runs the rollout; `approve` records a stage's approval; `status` shows the fleet. */
  action: "run" | "approve" | "status";
  /** How `status` prints. */
  output: "text" | "json";
  /** `-f`: the FLEET.yaml path. */
  fleetFile: string;
  /** The stage of `approve`. */
  stage?: string;
  /** The run flags. */
  run: Options;
  /** `--help`. */
  help: boolean;
}

/** Takes `-f PATH` (`--fleet-file`) and, for status, `-o FORMAT` (`--output`) out of argv. */
function takeOwnFlags(argv: string[], status: boolean) {
  const rest: string[] = [];
  let file: string | undefined;
  let output: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "-f" || a === "--fleet-file") file = argv[++i] ?? "";
    else if (a.startsWith("--fleet-file=")) file = a.slice("--fleet-file=".length);
    else if (status && (a === "-o" || a === "--output")) output = argv[++i] ?? "";
    else if (status && a.startsWith("--output=")) output = a.slice("--output=".length);
    else rest.push(a);
  }
  if (output !== undefined && output !== "text" && output !== "json") {
    throw new UsageError(`Invalid --output ${JSON.stringify(output)}: text or json`);
  }
  return { file, output: (output ?? "text") as "text" | "json", rest };
}

/**
 * Parses `fleet`'s arguments (after the word `fleet`).
 *
 * @example
 * ```ts
 * parseFleetOptions(["approve", "-f", "f.yaml", "eu", "--job-template", "t.yaml"]).stage; // "eu"
 * ```
 *
 * @throws {UsageError} naming the flag or argument at fault
 */
export function parseFleetOptions(argv: string[]): FleetOptions {
  const action = argv[0] === "approve" || argv[0] === "status" ? argv[0] : "run";
  const { file, output, rest } = takeOwnFlags(
    action === "run" ? argv : argv.slice(1),
    action === "status",
  );
  const help = rest.includes("-h") || rest.includes("--help");
  let stage: string | undefined;
  if (action === "approve" && !help) {
    const at = rest.findIndex((a) => !a.startsWith("-"));
    if (at !== 0) throw new UsageError("Missing STAGE: fleet approve -f FLEET.yaml STAGE");
    stage = rest.splice(at, 1)[0];
  }
  const run = parseOptions(rest);
  if (help) return { action, fleetFile: file ?? "", stage, run, help, output };
  if (!file) throw new UsageError("Missing -f FLEET.yaml: the fleet to roll out");
  if (run.context !== undefined) {
    throw new UsageError("Invalid --context with fleet: FLEET.yaml names the contexts");
  }
  if (run.dryRun !== undefined && action !== "run") {
    throw new UsageError(`Invalid --dry-run with fleet ${action}: it is a flag of the rollout`);
  }
  if (run.metricsAddr !== undefined) {
    throw new UsageError("Invalid --metrics-addr with fleet: not built for fleets yet");
  }
  return { action, fleetFile: file, stage, run, help, output };
}
