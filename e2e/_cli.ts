/**
 * Command-line parsing of `deno task cluster`. No I/O.
 *
 * @module
 */

import { OUTCOME_LABEL, parseLabel, parseTaint, type Taint } from "./_nodes.ts";

/** The complete help text. */
export const USAGE = `Usage: deno task cluster <command> [options]

Runs a local Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok) for the job-dispatcher e2e tests.

Commands:
  up        build if needed, start the cluster, create the nodes, print the kubeconfig path
  down      stop every component of the cluster
  status    print which components run and how many nodes exist; exit 1 unless all run
  hook RELEASE -n NS
            run a Helm release's hook for real: kwok only fakes the hook pod (Helm says
            deployed, no per-node Job exists), so run the dispatcher here with the hook
            Job's own arguments, volumes and ServiceAccount (docs/try-locally.md)

Options:
  --dir D               cluster directory (default: e2e/.work/cluster)
  --nodes N             up: number of fake nodes node-000, node-001, ... (default: 3)
  --label k=v           up: label every node (repeatable), e.g. ${OUTCOME_LABEL}=fail
  --taint k=v:Effect    up: taint every node (repeatable)
  --purge               down: also remove the cluster directory
  -n, --namespace NS    hook: the release's namespace (default: default)
  -h, --help            show this help
`;

/** Parsed command line. */
export interface CliOptions {
  command: "up" | "down" | "status" | "hook" | "help";
  dir: string;
  nodes: number;
  labels: Record<string, string>;
  taints: Taint[];
  purge: boolean;
  /** hook: the Helm release. */
  release?: string;
  /** hook: the release's namespace. */
  namespace: string;
}

/**
 * Parses the CLI arguments.
 *
 * @throws {SyntaxError} on an unknown command or option, or a malformed value
 */
export function parseArgs(args: string[], defaultDir: string): CliOptions {
  let command = "";
  const options: Omit<CliOptions, "command"> = {
    dir: defaultDir,
    nodes: 3,
    labels: {},
    taints: [],
    purge: false,
    namespace: "default",
  };
  for (let i = 0; i < args.length; i++) {
    const [flag, inline] = args[i].startsWith("--") && args[i].includes("=")
      ? [args[i].slice(0, args[i].indexOf("=")), args[i].slice(args[i].indexOf("=") + 1)]
      : [args[i], undefined];
    const value = () => {
      const v = inline ?? args[++i];
      if (v === undefined) throw new SyntaxError(`Cannot parse ${flag}: missing value`);
      return v;
    };
    switch (flag) {
      case "--dir":
        options.dir = value();
        break;
      case "--nodes": {
        const v = value();
        options.nodes = Number(v);
        if (!Number.isInteger(options.nodes) || options.nodes < 0) {
          throw new SyntaxError(`Cannot parse --nodes ${v}: expected a whole number`);
        }
        break;
      }
      case "--label": {
        const [k, v] = parseLabel(value());
        options.labels[k] = v;
        break;
      }
      case "--taint":
        options.taints.push(parseTaint(value()));
        break;
      case "--purge":
        options.purge = true;
        break;
      case "-n":
      case "--namespace":
        options.namespace = value();
        break;
      case "-h":
      case "--help":
        return { command: "help", ...options };
      default:
        if (command === "hook" && options.release === undefined && !flag.startsWith("-")) {
          options.release = flag;
          break;
        }
        if (flag.startsWith("-") || command !== "") {
          throw new SyntaxError(`Cannot parse arguments: unexpected "${args[i]}"`);
        }
        command = flag;
    }
  }
  if (command !== "up" && command !== "down" && command !== "status" && command !== "hook") {
    throw new SyntaxError(`Cannot parse arguments: expected a command up, down, status or hook`);
  }
  if (command === "hook" && options.release === undefined) {
    throw new SyntaxError("Cannot parse hook: name the Helm release, e.g. hook my-release -n NS");
  }
  return { command, ...options };
}
