/**
 * `job-dispatcher __complete contexts|namespaces [words typed so far]`, the
 * hidden command the completion scripts call: the kubeconfig's context
 * names (read from the files, no network), or the namespaces of the
 * cluster the typed `--kubeconfig`/`--context` name, by one list call of
 * at most {@linkcode COMPLETE_TIMEOUT_MS}. A completion must never stall
 * or spill errors into the prompt, so every failure is an empty answer.
 *
 * @module
 */

import { Kube, kubeconfigContexts } from "../kube/client.ts";

/** How long the namespace list may take, from reading the kubeconfig to the answer. */
export const COMPLETE_TIMEOUT_MS = 2000;

/**
 * The value of `--flag` (`--flag V` or `--flag=V`) in the words typed so
 * far; the last one wins, as when the command runs.
 *
 * @example
 * ```ts
 * typedValue(["-n", "ops", "--context=prod"], "context"); // "prod"
 * ```
 */
export function typedValue(words: readonly string[], flag: string): string | undefined {
  let value: string | undefined;
  for (let i = 0; i < words.length; i++) {
    // bash hands `--flag=V` over split at "=" (COMP_WORDBREAKS): "--flag", "=", "V".
    if (words[i] === `--${flag}` && words[i + 1] === "=") value = words[i += 2] ?? "";
    else if (words[i] === `--${flag}` && i + 1 < words.length) value = words[++i];
    else if (words[i].startsWith(`--${flag}=`)) value = words[i].slice(flag.length + 3);
  }
  return value || undefined;
}

/** The namespaces' names, by one bounded list call; empty when anything fails. */
async function namespaces(kubeconfig?: string, context?: string): Promise<string[]> {
  const signal = AbortSignal.timeout(COMPLETE_TIMEOUT_MS);
  let kube: Kube | undefined;
  const work = (async () => {
    kube = await Kube.connect({
      kubeconfig,
      context,
      signal,
      pluginSignal: signal,
      regularFilesOnly: true,
      apiWaitMs: 0,
      retry: { requestTimeoutMs: COMPLETE_TIMEOUT_MS, budgetMs: 0, baseDelayMs: 0, maxDelayMs: 0 },
    });
    const list = await kube.get<{ items?: { metadata?: { name?: string } }[] }>(
      "/api/v1/namespaces?limit=500",
      signal,
    );
    return (list?.items ?? []).flatMap((n) => n.metadata?.name ?? []);
  })();
  // An exec credential plugin may wait for a person: the timeout ends it all.
  const timeout = new Promise<string[]>((resolve) =>
    signal.addEventListener("abort", () => resolve([]), { once: true })
  );
  try {
    return await Promise.race([work.catch(() => []), timeout]);
  } finally {
    kube?.close();
  }
}

/**
 * The completion candidates of `kind`, one a line ("" when none or on any failure).
 *
 * @example
 * ```ts
 * await completeWords("contexts", ["--kubeconfig", "/nonexistent"]); // ""
 * ```
 */
export async function completeWords(kind: string, words: readonly string[]): Promise<string> {
  const kubeconfig = typedValue(words, "kubeconfig");
  let names: string[] = [];
  try {
    if (kind === "contexts") names = kubeconfigContexts(kubeconfig);
    if (kind === "namespaces") names = await namespaces(kubeconfig, typedValue(words, "context"));
  } catch {
    names = [];
  }
  return names.length ? `${names.join("\n")}\n` : "";
}
