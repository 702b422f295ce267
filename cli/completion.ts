/**
 * `job-dispatcher completion bash|zsh|fish`: a script that completes the
 * subcommands, every flag of each manual ({@linkcode COMMANDS}), the values
 * of a flag whose manual lists them, file paths, and `--context` /
 * `--namespace` names by asking the hidden `__complete` command, which reads
 * the kubeconfig (and, for namespaces, the cluster) at completion time.
 *
 * @module
 */

import { UsageError } from "../job.ts";
import { type Command, commandFlags, COMMANDS, helpTopics, TOPIC_ALIASES } from "./commands.ts";
import { enumerated, type FlagEntry } from "./manual.ts";

/** The shells `completion` writes for. */
export const SHELLS = ["bash", "zsh", "fish"] as const;

/** What a flag's value completes to. */
export type ValueKind =
  | { kind: "switch" }
  | { kind: "free" }
  | { kind: "files" }
  | { kind: "contexts" }
  | { kind: "namespaces" }
  | { kind: "words"; words: string[] };

// Values the manual writes as a placeholder, but which are one of a list.
const LISTED: Readonly<Record<string, Readonly<Record<string, string[]>>>> = {
  status: { output: ["text", "wide", "json"] },
};

// Placeholders of a file path: completed with the shell's own file names.
const FILE_VALUES = new Set(["PATH", "REPORT"]);

/**
 * What the value of `flag` of `cmd` completes to.
 *
 * @example
 * ```ts
 * valueKind(COMMANDS[0], { name: "on-gate-breach", value: "pause|exit", written: "" });
 * // { kind: "words", words: ["pause", "exit"] }
 * ```
 */
export function valueKind(cmd: Command, flag: FlagEntry): ValueKind {
  if (flag.value === undefined) return { kind: "switch" };
  const listed = LISTED[cmd.name]?.[flag.name] ?? enumerated(flag.value);
  if (listed) return { kind: "words", words: listed };
  if (flag.name === "context") return { kind: "contexts" };
  if (flag.name === "namespace") return { kind: "namespaces" };
  return FILE_VALUES.has(flag.value) ? { kind: "files" } : { kind: "free" };
}

/** A command's flags as the shell types them: `--name` and `-s`. */
function spellings(flag: FlagEntry): string[] {
  return [`--${flag.name}`, ...(flag.short ? [`-${flag.short}`] : [])];
}

const quote = (words: string[]) => words.join(" ");

/** The bash case arm of each flag that takes a value: "cmd --flag" -> its kind. */
function bashValueArms(): string[] {
  const arms: string[] = [];
  for (const cmd of COMMANDS) {
    for (const flag of commandFlags(cmd)) {
      const v = valueKind(cmd, flag);
      if (v.kind === "switch") continue;
      const what = v.kind === "words" ? `w ${quote(v.words)}` : v.kind;
      const pattern = spellings(flag).map((s) => `"${cmd.name} ${s}"`).join("|");
      arms.push(`    ${pattern}) echo "${what}" ;;`);
    }
  }
  return arms;
}

/** The bash case arm of each command: its flags, and the words that may follow it. */
function bashFlagArms(): string[] {
  return COMMANDS.map((cmd) => {
    const flags = commandFlags(cmd).flatMap(spellings);
    return `    "${cmd.name}") echo "${quote(flags)}" ;;`;
  });
}

/** The subcommands, as the first word. */
function subcommands(): string[] {
  return COMMANDS.filter((c) => c.name).map((c) => c.name);
}

/** The words a command takes after its name (`fleet approve`, `help gates`). */
function actions(cmd: Command): string[] {
  if (cmd.name !== "help") return [...(cmd.actions ?? [])];
  return [...helpTopics(), ...Object.keys(TOPIC_ALIASES)];
}

/**
 * The bash script: `_job_dispatcher`, bound to `job-dispatcher`.
 *
 * @example
 * ```ts
 * bashCompletion().includes("complete -F _job_dispatcher job-dispatcher"); // true
 * ```
 */
export function bashCompletion(): string {
  const actionArms = COMMANDS.filter((c) => actions(c).length).map((c) =>
    `    ${c.name}) words="${quote(actions(c))}" ;;`
  );
  return `# bash completion of job-dispatcher: source <(job-dispatcher completion bash)
__job_dispatcher_value() {
  case "$1 $2" in
${bashValueArms().join("\n")}
    *) echo none ;;
  esac
}
__job_dispatcher_flags() {
  case "$1" in
${bashFlagArms().join("\n")}
  esac
}
__job_dispatcher_actions() {
  local words=""
  case "$1" in
${actionArms.join("\n")}
  esac
  echo "$words"
}
_job_dispatcher() {
  # zsh (bashcompinit) numbers arrays from 1 unless told otherwise.
  [[ -n "\${ZSH_VERSION-}" ]] && setopt localoptions ksharrays
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="" flag="" prefix="" cmd="" kind
  ((COMP_CWORD > 0)) && prev="\${COMP_WORDS[COMP_CWORD-1]}"
  # bash splits --flag=value at "=" (COMP_WORDBREAKS): read the flag before it.
  if [[ "$cur" == "=" ]]; then
    flag="$prev"; cur=""
  elif [[ "$prev" == "=" ]] && ((COMP_CWORD > 1)); then
    flag="\${COMP_WORDS[COMP_CWORD-2]}"
  elif [[ "$cur" == --*=* ]]; then
    flag="\${cur%%=*}"; prefix="$flag="; cur="\${cur#*=}"
  else
    flag="$prev"
  fi
  if ((COMP_CWORD > 1)); then
    case "\${COMP_WORDS[1]}" in ${subcommands().join("|")}) cmd="\${COMP_WORDS[1]}" ;; esac
  fi
  if [[ "$flag" == -* ]]; then
    kind="$(__job_dispatcher_value "$cmd" "$flag")"
    case "$kind" in
      none) ;;
      free) COMPREPLY=(); return ;;
      files) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")); return ;;
      contexts | namespaces)
        # The kubeconfig (and --context) typed so far; nothing offered on failure.
        # A context's name is free text ("$(...)", "eu west"): matched and escaped
        # here, one a line, never through compgen -W, which expands its words.
        # stdin is /dev/null: an exec credential plugin must not read the prompt's keys.
        local name
        COMPREPLY=()
        while IFS= read -r name; do
          [[ -n "$name" && "$name" == "$cur"* ]] && COMPREPLY+=("$prefix$(printf '%q' "$name")")
        done < <(job-dispatcher __complete "$kind" \\
          "\${COMP_WORDS[@]:1:$((COMP_CWORD - 1))}" </dev/null 2>/dev/null)
        return ;;
      *) COMPREPLY=($(compgen -P "$prefix" -W "\${kind#w }" -- "$cur")); return ;;
    esac
  fi
  if ((COMP_CWORD == 1)) && [[ "$cur" != -* ]]; then
    COMPREPLY=($(compgen -W "${quote(subcommands())}" -- "$cur")); return
  fi
  if ((COMP_CWORD == 2)) && [[ -n "$cmd" && "$cur" != -* ]]; then
    COMPREPLY=($(compgen -W "$(__job_dispatcher_actions "$cmd")" -- "$cur"))
    [[ \${#COMPREPLY[@]} -gt 0 || "$cmd" == help || "$cmd" == completion ]] && return
  fi
  COMPREPLY=($(compgen -W "$(__job_dispatcher_flags "$cmd")" -- "$cur"))
}
complete -F _job_dispatcher job-dispatcher
`;
}

/**
 * The zsh script: the bash completion through zsh's bashcompinit, so both
 * shells complete alike.
 */
export function zshCompletion(): string {
  return `#compdef job-dispatcher
# zsh completion of job-dispatcher: source <(job-dispatcher completion zsh)
(( $+functions[compdef] )) || { autoload -U +X compinit && compinit; }
autoload -U +X bashcompinit && bashcompinit
${bashCompletion().split("\n").slice(1).join("\n")}`;
}

/** One fish `complete` line per flag of `cmd`, under `condition`. */
function fishFlags(cmd: Command, condition: string): string[] {
  return commandFlags(cmd).map((flag) => {
    const short = flag.short ? ` -s ${flag.short}` : "";
    const v = valueKind(cmd, flag);
    const args = v.kind === "switch"
      ? ""
      : v.kind === "files"
      ? " -r -F"
      : v.kind === "words"
      ? ` -x -a '${quote(v.words)}'`
      : v.kind === "free"
      ? " -x"
      : ` -x -a '(job-dispatcher __complete ${v.kind} (commandline -opc)[2..-1] </dev/null 2>/dev/null)'`;
    return `complete -c job-dispatcher -n '${condition}' -l ${flag.name}${short}${args}`;
  });
}

/** The fish script: `complete` lines for every command, flag and value. */
export function fishCompletion(): string {
  const subs = quote(subcommands());
  const lines = [
    "# fish completion of job-dispatcher: job-dispatcher completion fish | source",
    "complete -c job-dispatcher -f",
    `complete -c job-dispatcher -n 'test (count (commandline -opc)) -eq 1' -a '${subs}'`,
  ];
  for (const cmd of COMMANDS) {
    const condition = cmd.name
      ? `__fish_seen_subcommand_from ${cmd.name}`
      : `not __fish_seen_subcommand_from ${subs}`;
    lines.push(...fishFlags(cmd, condition));
    if (actions(cmd).length) {
      const after = `${condition}; and test (count (commandline -opc)) -eq 2`;
      lines.push(`complete -c job-dispatcher -n '${after}' -a '${quote(actions(cmd))}'`);
    }
  }
  return `${lines.join("\n")}\n`;
}

/**
 * The script `job-dispatcher completion SHELL` prints.
 *
 * @throws {UsageError} for a shell it does not write for, naming those it does
 */
export function completionScript(shell: string | undefined): string {
  if (shell === "bash") return bashCompletion();
  if (shell === "zsh") return zshCompletion();
  if (shell === "fish") return fishCompletion();
  throw new UsageError(
    `${shell === undefined ? "Missing shell" : `Invalid shell ${JSON.stringify(shell)}`}: ` +
      `write job-dispatcher completion ${SHELLS.join("|")}`,
  );
}
