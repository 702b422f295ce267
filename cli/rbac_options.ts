/**
 * `job-dispatcher rbac …` on the command line: `--service-account NAME`,
 * `--viewer`, and the run flags (cli/options.ts) whose permissions it prints.
 *
 * @module
 */

import { UsageError } from "../job.ts";
import { type Options, parseOptions } from "./options.ts";

/** `job-dispatcher rbac --help`. */
export const RBAC_HELP = `job-dispatcher rbac: the RBAC a run with these flags needs, as YAML.

USAGE
  job-dispatcher rbac --job-template PATH [run flags] [--service-account NAME]
                      [--required-only]
  job-dispatcher rbac --viewer [-n NAMESPACE] [--service-account NAME]

  Prints the ServiceAccount, the ClusterRole (nodes; pods and evictions in
  every namespace with --drain), the Role of the Jobs' namespace (jobs,
  pods, events, the run record's configmaps), the Role for Events on Nodes
  in "default", and their bindings, for kubectl apply -f -. They are the
  permissions the run's pre-flight asks the API server about before it
  touches anything, for exactly the flags given: a run with the same flags
  under that ServiceAccount passes its pre-flight, and any rule taken away
  is named by it (a required one stops the run, exit 3; an optional one,
  which only records, is a warning). Nothing is sent to a cluster.

  The namespace is -n, else $POD_NAMESPACE, else the in-cluster service
  account's, else "default" (the kubeconfig is not read).

OPTIONS
  --service-account NAME  The ServiceAccount to create and bind
                          (default job-dispatcher; with --viewer
                          job-dispatcher-viewer).
  --admission-policies=false
                          Leave out the ValidatingAdmissionPolicies (and
                          their bindings and params ConfigMap) printed after
                          the RBAC: Jobs pinned to one node, of the
                          templates' images and privileges; node writes of
                          the run's own keys only (docs/admission-policies.md).
                          They need admissionregistration.k8s.io/v1
                          (Kubernetes 1.30+).
  --required-only         Only the rules the run stops without (exit 3 at its
                          pre-flight): no patch nodes unless a flag writes
                          nodes, no Events, no run record. A comment at the
                          top names each rule left out, in the words of the
                          warning the run then gives. Off by default: the
                          run records less without them (no node marks, so
                          a re-run cannot tell a node done by a collected
                          Job; no Events; no record for status).
  --viewer                The read-only roles of job-dispatcher status
                          instead: the per-node Jobs, the run record, the
                          nodes; bound to the ServiceAccount.
  [run flags]             As for a run (job-dispatcher --help); bad flags
                          are refused with the run's own errors.
  -h, --help              This text.
`;

/** `rbac`'s arguments. */
export interface RbacOptions {
  /** `--viewer`: the roles of `status`. */
  viewer: boolean;
  /** `--service-account`. */
  serviceAccount: string;
  /** The run flags; for `--viewer` only the namespace is read. */
  run: Options;
  /** `--help`. */
  help: boolean;
  /** `--admission-policies` (default true): print the ValidatingAdmissionPolicies too. */
  admissionPolicies: boolean;
  /** `--required-only`: only the needs the run stops without. */
  requiredOnly: boolean;
}

/** A kubectl-style boolean `--name`, `--name=true`, `--name=false`; undefined when `a` is another flag. */
function boolFlag(a: string, name: string): boolean | undefined {
  if (a === name || a === `${name}=true`) return true;
  if (a === `${name}=false`) return false;
  if (a.startsWith(`${name}=`)) {
    throw new UsageError(`Invalid ${a}: it takes =true or =false (or no value: true)`);
  }
  return undefined;
}

/** Takes `rbac`'s own flags (`--service-account NAME`, `--viewer`, …) out of argv. */
function takeOwnFlags(argv: string[]) {
  const rest: string[] = [];
  let account: string | undefined;
  let viewer = false;
  let policies = true;
  let requiredOnly = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const required = boolFlag(a, "--required-only");
    if (required !== undefined) requiredOnly = required;
    else if (a === "--service-account") account = argv[++i] ?? "";
    else if (a.startsWith("--service-account=")) account = a.slice("--service-account=".length);
    else if (a === "--viewer") viewer = true;
    else if (a === "--admission-policies" || a === "--admission-policies=true") policies = true;
    else if (a === "--admission-policies=false") policies = false;
    else if (a.startsWith("--admission-policies=")) {
      throw new UsageError(`Invalid ${a}: --admission-policies takes =true or =false`);
    } else rest.push(a);
  }
  // A DNS-1123 subdomain, as the API server requires of a ServiceAccount's
  // name: at most 253 characters of dot-separated labels, each starting and
  // ending with a letter or digit (so no "..", ".-" or "-.").
  const label = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
  const subdomain = new RegExp(`^${label}(\\.${label})*$`);
  if (account !== undefined && (account.length > 253 || !subdomain.test(account))) {
    throw new UsageError(
      `Invalid --service-account ${JSON.stringify(account)}: at most 253 lower-case letters, ` +
        "digits, '-' and '.', each '.'-separated part starting and ending with a letter or digit",
    );
  }
  // The viewer's reads are all required: the flag would change nothing, so a
  // user who expects it to is told.
  if (viewer && requiredOnly) {
    throw new UsageError(
      "Invalid argument --required-only with --viewer: it takes only -n and --service-account",
    );
  }
  return { account, viewer, policies, requiredOnly, rest };
}

/**
 * Parses `rbac`'s arguments (after the word `rbac`).
 *
 * @example
 * ```ts
 * parseRbacOptions(["--viewer", "-n", "ops"]).run.namespace; // "ops"
 * ```
 *
 * @throws {UsageError} naming the flag at fault, as the run does
 */
export function parseRbacOptions(argv: string[]): RbacOptions {
  const { account, viewer, policies, requiredOnly, rest } = takeOwnFlags(argv);
  const help = rest.includes("-h") || rest.includes("--help");
  if (viewer && !help) {
    const other = rest.find((a, i) =>
      !["-n", "--namespace"].includes(a) && !/^--namespace=/.test(a) &&
      !["-n", "--namespace"].includes(rest[i - 1])
    );
    if (other !== undefined) {
      throw new UsageError(
        `Invalid argument ${other} with --viewer: it takes only -n and --service-account`,
      );
    }
  }
  // The viewer's roles depend on no template: a stand-in satisfies the run's parser.
  const run = parseOptions(viewer ? [...rest, "--job-template", "-"] : rest);
  return {
    viewer,
    serviceAccount: account ?? (viewer ? "job-dispatcher-viewer" : "job-dispatcher"),
    run,
    help,
    admissionPolicies: policies && !viewer,
    requiredOnly,
  };
}
