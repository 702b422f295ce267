/**
 * The subcommands and their manuals in one list, and `job-dispatcher help
 * TOPIC`: one section of `--help`, found by its heading, a common word
 * for it, or a flag it defines. The flag reference and the completion read
 * the same list, so a new subcommand is one entry here.
 *
 * @module
 */

import { UsageError } from "../job.ts";
import type { FlagSpec } from "./flag_errors.ts";
import { FLEET_HELP } from "./fleet_options.ts";
import { flagEntries, type FlagEntry, manualSections, type Section } from "./manual.ts";
import { FLAGS, HELP } from "./options.ts";
import { STATUS_FLAGS, STATUS_HELP } from "./status_options.ts";
import { RBAC_HELP } from "./rbac_options.ts";

/** One command of the CLI: its word, its manual and the flags it parses. */
export interface Command {
  /** The word after `job-dispatcher` ("" for the run itself). */
  name: string;
  /** Its `--help`. */
  help: string;
  /** The table its flags are parsed with, where it has one of its own. */
  table?: Readonly<Record<string, FlagSpec>>;
  /** Words that may follow it (`fleet approve`). */
  actions?: readonly string[];
  /** It also takes the run's flags (`fleet`). */
  runFlags?: boolean;
}

/** `job-dispatcher completion --help`. */
export const COMPLETION_HELP = `job-dispatcher completion: shell completion.

USAGE
  job-dispatcher completion bash|zsh|fish

  Prints a script that completes the subcommands, every flag of --help, the
  values of a flag that takes one of a list (-o, --on-gate-breach, ...),
  --context from the kubeconfig and --namespace from the cluster (one list
  call of at most 2 s; nothing offered when it fails). Load it with
    bash:  source <(job-dispatcher completion bash)      (~/.bashrc)
    zsh:   source <(job-dispatcher completion zsh)       (~/.zshrc)
    fish:  job-dispatcher completion fish | source       (config.fish)
`;

/** `job-dispatcher help --help`. */
export const HELP_HELP = `job-dispatcher help: one section of --help.

USAGE
  job-dispatcher help TOPIC

  TOPIC is a section of --help (gates, drain, waves, exit-codes, ...), a
  subcommand (status, fleet, completion) or a flag (parallelism, --drain):
  the section that defines it. An unknown topic lists them, exit 2.
`;

/** Every command, the run first. A new subcommand adds its entry here. */
export const COMMANDS: readonly Command[] = [
  { name: "", help: HELP, table: FLAGS },
  { name: "status", help: STATUS_HELP, table: STATUS_FLAGS },
  { name: "fleet", help: FLEET_HELP, actions: ["approve", "status"], runFlags: true },
  { name: "rbac", help: RBAC_HELP, runFlags: true },
  { name: "help", help: HELP_HELP },
  { name: "completion", help: COMPLETION_HELP, actions: ["bash", "zsh", "fish"] },
];

/**
 * The flags a command takes, as its manual defines them (with the run's
 * flags for `fleet`), each once.
 *
 * @example
 * ```ts
 * commandFlags(COMMANDS[1]).some((f) => f.name === "watch"); // true
 * ```
 */
export function commandFlags(cmd: Command): FlagEntry[] {
  const own = flagEntries(cmd.help);
  if (!cmd.runFlags) return own;
  const run = flagEntries(HELP).filter((f) => !own.some((o) => o.name === f.name));
  return [...own, ...run];
}

/** Common words for the sections of `--help`, each naming a section's topic. */
export const TOPIC_ALIASES: Readonly<Record<string, string>> = {
  top: "most-used",
  gates: "health-gates",
  gate: "health-gates",
  prometheus: "health-gates",
  drain: "node-maintenance",
  cordon: "node-maintenance",
  maintenance: "node-maintenance",
  window: "node-maintenance",
  windows: "node-maintenance",
  pause: "node-maintenance",
  pdb: "node-maintenance",
  waves: "rollout-safety",
  canary: "rollout-safety",
  safety: "rollout-safety",
  rollout: "rollout-safety",
  verify: "node-verification",
  verification: "node-verification",
  labels: "node-lifecycle",
  lifecycle: "node-lifecycle",
  taints: "node-lifecycle",
  cleanup: "node-lifecycle",
  pacing: "pacing-and-ownership",
  owner: "pacing-and-ownership",
  api: "api-client",
  qps: "api-client",
  kubeconfig: "cluster-access",
  context: "cluster-access",
  access: "cluster-access",
  plan: "output",
  report: "output",
  metrics: "output",
  exit: "exit-codes",
  codes: "exit-codes",
  selector: "selection",
  nodes: "selection",
};

/** The sections of `--help` a topic may name (the text before the first heading is none). */
function topicSections(): Section[] {
  return manualSections(HELP).filter((s) => s.topic !== "");
}

/**
 * The topics `help` knows: each section of `--help`, then each subcommand.
 *
 * @example
 * ```ts
 * helpTopics().includes("health-gates"); // true
 * ```
 */
export function helpTopics(): string[] {
  return [
    ...topicSections().map((s) => s.topic),
    ...COMMANDS.filter((c) => c.name).map((c) => c.name),
  ];
}

/**
 * What `job-dispatcher help TOPIC` prints: the section, the subcommand's
 * manual, or the section that defines the flag (the run's, else a
 * subcommand's); no topic: the manual.
 *
 * @throws {UsageError} for an unknown topic, listing the topics
 * @example
 * ```ts
 * helpText("gates").startsWith("HEALTH GATES"); // true
 * ```
 */
export function helpText(topic: string | undefined): string {
  if (topic === undefined) return HELP;
  const word = topic.toLowerCase().replace(/^-+/, "");
  const sections = topicSections();
  const name = TOPIC_ALIASES[word] ?? word;
  const section = sections.find((s) => s.topic === name);
  if (section) return `${section.text}\n`;
  const cmd = COMMANDS.find((c) => c.name && c.name === word);
  if (cmd) return cmd.help;
  // A flag: the section that defines it (not the most-used list, which repeats it).
  const defining = sections.find((s) =>
    s.topic !== "most-used" && flagEntries(s.text).some((f) => f.name === word || f.short === word)
  );
  if (defining) return `${defining.text}\n`;
  // A subcommand's own flag (status --watch, fleet --fleet-file): its manual's section.
  const own = COMMANDS.filter((c) => c.name).flatMap((c) => manualSections(c.help)).find((s) =>
    flagEntries(s.text).some((f) => f.name === word || f.short === word)
  );
  if (own) return `${own.text}\n`;
  throw new UsageError(
    `Unknown help topic ${JSON.stringify(topic)}: try one of ${helpTopics().join(", ")} ` +
      "(or a flag, e.g. help parallelism)",
  );
}
