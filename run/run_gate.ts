/**
 * The health gate of a run (`--gate-*`, gates/): opened before the first
 * Job (the exit latch of an earlier run, every query evaluated once), hooked
 * to the run's pause, log and owner Job, and its exit latch set when it
 * stopped the rollout.
 *
 * @module
 */

import { labelValue, UsageError } from "../job.ts";
import type { Kube } from "../kube/client.ts";
import type { Logger } from "../report/log.ts";
import type { Recorder } from "../report/report.ts";
import type { RunMetrics } from "../report/metrics.ts";
import type { PauseGate } from "../engine/pause.ts";
import type { GateConfig } from "../gates/config.ts";
import { HealthGate } from "../gates/gate.ts";
import {
  BadQueryError,
  directGet,
  measure,
  PrometheusUnreachable,
  proxyGet,
  viaApiServer,
} from "../gates/prometheus.ts";
import {
  clearExitLatchCommand,
  exitLatchName,
  pauseFile,
  pauseOwner,
  readExitLatch,
  resumeOwnerCommand,
  setExitLatch,
} from "../gates/latch.ts";
import { describeBreach } from "../gates/state.ts";
import { EXIT } from "../report/summary.ts";
import type { Plan } from "./plan.ts";

/** What opening the gate needs. */
export interface GateRun {
  /** The gates' configuration. */
  config: GateConfig;
  /** The plan: namespace, prefix, owner, keys. */
  plan: Plan;
  /** The API client (the service proxy, the latches). */
  kube: Kube;
  /** The logger. */
  log: Logger;
  /** `--pause-file`, where a breach pauses a run without an owner. */
  pauseFilePath?: string;
}

/**
 * How long one request to Prometheus may take: half an interval, 5 to 10 s.
 * A slow answer only makes the result stale (starts wait for the next); one
 * cut short would be an outage, and at start a refusal (exit 3).
 */
function timeoutMs(c: GateConfig): number {
  return Math.min(10_000, Math.max(5_000, c.intervalSecs * 500));
}

/**
 * Opens the gate before anything is created: refuses while an earlier run's
 * exit latch is set, then evaluates every query once.
 *
 * @returns the gate under way, or the exit code of a refusal (5: latched; 3:
 * Prometheus does not answer), said in one line
 * @throws {UsageError} for a query Prometheus rejects, or a flag that does not fit the URL
 */
export async function openGate(g: GateRun): Promise<HealthGate | number> {
  const { config, plan, kube, log } = g;
  const latched = await readExitLatch(kube, plan.namespace, plan.prefix);
  if (latched !== undefined) {
    log.error(
      `Refusing to start: a health gate stopped an earlier run (${latched}); ` +
        `once the fleet is healthy, clear the latch: ${
          clearExitLatchCommand(plan.namespace, plan.prefix)
        }`,
    );
    return EXIT.gate;
  }
  const gate = new HealthGate({ config, measure: measure(transport(g), config) });
  try {
    await gate.start();
  } catch (e) {
    if (e instanceof BadQueryError) {
      const what = e.query === undefined
        ? "--gate-alerts"
        : `--gate-query ${JSON.stringify(e.query)}`;
      throw new UsageError(`Invalid ${what}: Prometheus rejected it: ${e.message}`);
    }
    if (!(e instanceof PrometheusUnreachable)) throw e;
    log.error(
      `Cannot reach Prometheus ${config.url} (--gate-prometheus-url): ${e.message}; nothing was created`,
    );
    return EXIT.cluster;
  }
  return gate;
}

/** How Prometheus is reached: through the API server's service proxy, or directly. */
function transport({ config, kube }: GateRun) {
  if (viaApiServer(config.url, kube.server)) {
    const flag = config.bearerTokenFile
      ? "gate-bearer-token-file"
      : config.caFile && "gate-ca-file";
    if (flag) {
      throw new UsageError(
        `Invalid --${flag}: the service proxy URL is reached with the kubeconfig's credentials; drop it`,
      );
    }
    return proxyGet(kube, config.url);
  }
  try {
    return directGet({ ...config, timeoutMs: timeoutMs(config) }).get;
  } catch (e) {
    throw new UsageError(`Cannot read --gate-ca-file ${config.caFile}: ${(e as Error).message}`);
  }
}

/**
 * Hooks the gate to the run's main phase: a breach is logged and recorded
 * on the owner Job, and (`--on-gate-breach pause`) latched by the run's own
 * pause, which the gate watches to know when a person lifted it.
 *
 * @param pauses the owner's annotation and the pause file, as the run follows them
 */
export async function bindGate(
  gate: HealthGate,
  g: GateRun & { recorder: Recorder; metrics?: RunMetrics },
  pauses: { owner?: PauseGate; file?: PauseGate },
): Promise<void> {
  const { config, plan, kube, log, recorder } = g;
  const owner = plan.owner;
  const resume = owner
    ? resumeOwnerCommand({ namespace: plan.namespace, owner, pausedKey: plan.keys.paused })
    : `rm ${g.pauseFilePath}`;
  const then = config.onBreach === "exit"
    ? "the run ends once the Jobs in flight finished (exit 5)"
    : `the run pauses itself and stays paused; once the fleet is healthy, resume: ${resume}`;
  const pause = owner ? pauses.owner : pauses.file;
  await gate.bind({
    onBreach: (b) => {
      const msg = `health gate breached: ${describeBreach(b)}; no new Job starts, ` +
        `Jobs in flight finish; ${then}`;
      log.warn(msg, { event: "gateBreached", query: b.query, value: b.value });
      recorder.ownerWarning("GateBreached", msg);
      g.metrics?.breach();
    },
    latch: config.onBreach === "exit"
      ? undefined
      : owner
      ? (b) =>
        pauseOwner({ kube, namespace: plan.namespace, owner, pausedKey: plan.keys.paused }, b)
      : (b) => pauseFile(g.pauseFilePath!, b),
    pauseSeen: () => pause?.pausedBy() !== undefined,
    onOutage: (state, detail) =>
      state === "paused"
        ? log.warn(`${detail}; no node fails for it`, { event: "gateOutage", state, detail })
        : log.info(`health gate: ${detail}; starts resume`, { event: "gateOutage", state, detail }),
  });
}

/**
 * Where a breach's latch lives, in words, for the report: the owner's
 * pause annotation, the pause file, or (`--on-gate-breach exit`) the
 * ConfigMap the next run reads.
 */
export function latchWhere({ config, plan, pauseFilePath }: GateRun): string {
  if (config.onBreach === "exit") {
    return `ConfigMap ${plan.namespace}/${exitLatchName(plan.prefix)}`;
  }
  return plan.owner
    ? `owner Job ${plan.namespace}/${plan.owner.name} annotation ${plan.keys.paused}`
    : `pause file ${pauseFilePath}`;
}

/**
 * After a rollout the gate stopped (`--on-gate-breach exit`): sets the exit
 * latch the next run reads, and says how to clear it.
 *
 * @returns whether the gate stopped the rollout
 */
export async function latchExit(gate: HealthGate | undefined, g: GateRun): Promise<boolean> {
  const s = gate?.state;
  if (!gate?.stopsBy() || !(s?.kind === "breached" || s?.kind === "latched")) return false;
  const { plan, kube, log } = g;
  try {
    await setExitLatch(kube, {
      namespace: plan.namespace,
      prefix: plan.prefix,
      labels: { [plan.keys.owner]: labelValue(plan.prefix) },
    }, s.breach);
    gate.latchedOutside();
    log.warn(
      `stopped by a health gate: ${describeBreach(s.breach)}; the next run refuses to start ` +
        `until the latch is cleared: ${clearExitLatchCommand(plan.namespace, plan.prefix)}`,
      { event: "gateLatched", query: s.breach.query, value: s.breach.value },
    );
  } catch (e) {
    log.error(`Cannot set the health gate's latch: ${(e as Error).message}`);
  }
  return true;
}
