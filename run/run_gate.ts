/**
 * The health gate of a run (`--gate-*`, gates/): opened before the first
 * Job (the exit latch of an earlier run, every query evaluated once, every
 * selector found in data), hooked to the run's pause, log and owner Job,
 * and its latch written the moment a breach is seen: the owner's pause, or
 * with `--on-gate-breach exit` the exit latch ConfigMap; a pause that
 * cannot be written stops the run, with the exit latch left in its place.
 *
 * @module
 */

import { labelValue, UsageError } from "../job.ts";
import type { Kube } from "../kube/client.ts";
import type { Logger } from "../report/log.ts";
import type { Recorder } from "../report/report.ts";
import { recordGates } from "../report/record_gates.ts";
import type { RunMetrics } from "../report/metrics.ts";
import { pauseFileExists, type PauseGate } from "../engine/pause.ts";
import type { GateConfig } from "../gates/config.ts";
import { HealthGate, LatchRefused } from "../gates/gate.ts";
import {
  BadQueryError,
  directGet,
  measure,
  type Measurement,
  PrometheusUnreachable,
  proxyGet,
  viaApiServer,
} from "../gates/prometheus.ts";
import {
  clearExitLatchCommand,
  exitLatchName,
  pausedReasonKey,
  pauseFile,
  pauseOwner,
  readExitLatch,
  refusesLatch,
  resumeOwnerCommand,
  setExitLatch,
} from "../gates/latch.ts";
import { type Breach, describeBreach, isBreached } from "../gates/state.ts";
import { EXIT } from "../report/summary.ts";
import type { Plan } from "./plan.ts";
import { earlierOwners, type OwnerGuardOptions } from "./owner_guard.ts";

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
  /** The caller's hook, told of a breach ({@linkcode RunContext.onStop}). */
  onStop?: (cause: string, code: number) => void;
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
 * Refuses (exit 5, said in one line) while an earlier run's exit latch is
 * set: read before the gate opens, and again when a run that waited for an
 * earlier one (the owner guard) actually starts, since that run may have
 * latched meanwhile.
 *
 * @returns the exit code of the refusal, or undefined: no latch
 */
export async function refuseIfLatched(
  g: Pick<GateRun, "plan" | "kube" | "log">,
): Promise<number | undefined> {
  const { plan, kube, log } = g;
  const latched = await readExitLatch(kube, plan.namespace, plan.prefix);
  if (latched === undefined) return undefined;
  log.error(
    `Refusing to start: a health gate stopped an earlier run (${latched}); ` +
      `once the fleet is healthy, clear the latch: ${
        clearExitLatchCommand(plan.namespace, plan.prefix)
      }`,
  );
  return EXIT.gate;
}

/**
 * Refuses (exit 5, said in one line) while an earlier owner of the release
 * (a hook Job of an earlier revision, its run over: the owner guard waited
 * for a live one) still carries the pause its gate set for a breach
 * (`<P>/paused=true` with `<P>/paused-reason`). Pause mode's latch lives on
 * that owner; a run stopped while it held (`activeDeadlineSeconds`, the
 * hook's pod evicted, a SIGTERM) leaves it there, lifted by no one, and the
 * next revision's run would otherwise roll on once the metric recovered.
 *
 * @returns the exit code of the refusal, or undefined: no such pause
 */
export async function refuseIfEarlierPaused(
  guard: OwnerGuardOptions & { log: Pick<Logger, "error"> },
): Promise<number | undefined> {
  const { earlier } = await earlierOwners(guard);
  const { keys, namespace, log } = guard;
  const held = earlier.find((j) => {
    const a = j.metadata?.annotations ?? {};
    return a[keys.paused] === "true" && a[pausedReasonKey(keys.paused)] !== undefined;
  });
  if (!held?.metadata?.name) return undefined;
  const owner = { name: held.metadata.name, uid: held.metadata.uid ?? "" };
  log.error(
    `Refusing to start: a health gate paused an earlier run of this release (hook job ` +
      `${namespace}/${owner.name}: ${
        held.metadata.annotations?.[pausedReasonKey(keys.paused)]
      }) and no one lifted it; once the fleet is healthy, lift it: ${
        resumeOwnerCommand({ namespace, owner, pausedKey: keys.paused })
      }`,
  );
  return EXIT.gate;
}

/**
 * Opens the gate before anything is created: refuses while an earlier run's
 * exit latch is set, then evaluates every query once and finds data for
 * every selector.
 *
 * @returns the gate under way, or the exit code of a refusal (5: latched; 3:
 * Prometheus does not answer), said in one line
 * @throws {UsageError} for a query Prometheus rejects (400, 422), a selector
 * that matches no series, a query whose selectors cannot be read, or a flag
 * that does not fit the URL
 */
export async function openGate(g: GateRun): Promise<HealthGate | number> {
  const { config, log } = g;
  const refused = await refuseIfLatched(g);
  if (refused !== undefined) return refused;
  const gate = new HealthGate({ config, measure: measure(transport(g), config) });
  let first: Measurement;
  try {
    first = await gate.start();
  } catch (e) {
    await gate.stop();
    if (e instanceof BadQueryError) {
      const what = e.query === undefined
        ? "--gate-alerts"
        : `--gate-query ${JSON.stringify(e.query)}`;
      throw new UsageError(`Invalid ${what}: Prometheus rejected it: ${e.message}`);
    }
    if (e instanceof SyntaxError) throw new UsageError(e.message);
    if (!(e instanceof PrometheusUnreachable)) throw e;
    log.error(
      `Cannot reach Prometheus ${config.url} (--gate-prometheus-url): ${e.message}; nothing was created`,
    );
    return EXIT.cluster;
  }
  if (first.dark.length) {
    await gate.stop();
    throw new UsageError(darkRefusal(first, config.url));
  }
  return gate;
}

/**
 * A refusal of selectors that match no series, one line: each selector and
 * its query, and the two ways out.
 */
function darkRefusal(m: Measurement, url: string): string {
  const [d, ...more] = m.dark;
  const also = more.length
    ? ` (and ${more.map((x) => JSON.stringify(x.selector)).join(", ")})`
    : "";
  if (d.alerts) {
    return `Invalid --gate-alerts ${JSON.stringify(d.selector)}: it names no alerting rule of ` +
      `Prometheus ${url} (/api/v1/rules), so it could never fire${also}; fix the name, or, ` +
      `if that is meant, --gate-allow-empty ${JSON.stringify(d.selector)}`;
  }
  const allow = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(d.selector)
    ? d.selector
    : `'${d.selector.replaceAll("'", "'\\''")}'`;
  if (d.rule !== undefined) {
    return `Invalid --gate-query ${JSON.stringify(d.query)}: its selector ${d.selector}: ` +
      `alertname ${d.rule} names no alerting rule of Prometheus ${url} (/api/v1/rules), so ` +
      `it could never fire${also}; fix the name, or, if that is meant, --gate-allow-empty ${allow}`;
  }
  return `Invalid --gate-query ${JSON.stringify(d.query)}: its selector ${d.selector} matches ` +
    `no series in Prometheus ${url}${also}, so an empty answer would say nothing about health; ` +
    `fix the metric or labels (a typo, an exporter not scraped), or, if it is meant to be ` +
    `absent while healthy, --gate-allow-empty ${allow}`;
}

/**
 * A gate that is not a run's: the same measurement and state machine, but
 * its caller measures it (`checkNow`) and binds its latch; a fleet watches
 * its clusters' gates through the soak between two stages with it.
 *
 * @throws {UsageError} for a flag that does not fit the URL
 */
export function watchOnlyGate(config: GateConfig, kube: Kube): HealthGate {
  return new HealthGate({ config, measure: measure(transport({ config, kube }), config) });
}

/** How Prometheus is reached: through the API server's service proxy, or directly. */
function transport({ config, kube }: Pick<GateRun, "config" | "kube">) {
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
 * Hooks the gate to the run's main phase: a breach is latched first (the
 * owner's pause or the pause file, or with `--on-gate-breach exit` the exit
 * latch), then logged and recorded on the owner Job; the gate watches the
 * pause to know when a person lifted it. A pause refused for good leaves the
 * exit latch in its place and stops the run.
 *
 * @param pauses the owner's annotation and the pause file, as the run follows them
 */
export async function bindGate(
  gate: HealthGate,
  g: GateRun & { recorder: Recorder; metrics?: RunMetrics },
  pauses: { owner?: PauseGate; file?: PauseGate },
): Promise<void> {
  const { config, plan, log, recorder } = g;
  const pause = plan.owner ? pauses.owner : pauses.file;
  followGate(gate, g, pause);
  await gate.bind({
    onBreach: (b, latch) => {
      const msg = `health gate breached: ${describeBreach(b)}; no new Job starts, ` +
        `Jobs in flight finish; ${breachThen(g, latch)}`;
      log.warn(msg, { event: "gateBreached", query: b.query, value: b.value, latch });
      recorder.ownerWarning("GateBreached", msg);
      g.metrics?.breach();
      g.onStop?.(`health gate breached: ${describeBreach(b)}`, EXIT.gate);
    },
    latch: config.onBreach === "exit" ? (b) => writeExitLatch(g, b) : (b) => writePause(g, b),
    giveUp: config.onBreach === "exit"
      ? undefined
      : async (b, e) => (await pauseInstead(g, b, e, "failing for three gate intervals")).message,
    pauseSeen: config.onBreach === "exit"
      ? undefined
      // The file looked at now, not as the run's FilePause last saw it (once
      // a second): a file removed within that second would never have been
      // seen, and the latch it set never lifted. The owner's annotation is
      // read from its watch, which lags the PATCH: the gate waits to see it.
      : plan.owner
      ? () => pause?.pausedBy() !== undefined
      : () => pauseFileExists(g.pauseFilePath!),
    onHold: ({ kind, state, detail }) =>
      state === "paused"
        ? log.warn(`${detail}; no node fails for it`, { event: "gateOutage", kind, state, detail })
        : log.info(`health gate: ${detail}; starts resume`, {
          event: "gateOutage",
          kind,
          state,
          detail,
        }),
  });
}

/**
 * The run record carries the gate's state (`status` says it): read at every
 * write, written anew at every change of its kind.
 */
function followGate(
  gate: HealthGate,
  g: GateRun & { recorder: Recorder },
  pause: PauseGate | undefined,
): void {
  const queries = g.config.queries.length + (g.config.alerts ? 1 : 0);
  const lift = liftCommand(g);
  // The pause's latch set by the pod this one replaced is held until a person lifts it.
  const heldFor = () => g.config.onBreach === "exit" ? undefined : pause?.heldFor?.();
  const changed = g.recorder.followGates(() =>
    recordGates(gate.state, { queries, checkedAt: gate.checkedAt, lift, heldFor: heldFor() })
  );
  gate.subscribe(changed);
}

/** The command that lifts the latch of a breach: the pause's, or the exit latch's. */
function liftCommand(
  { config, plan, pauseFilePath }: Pick<GateRun, "config" | "plan" | "pauseFilePath">,
): string {
  if (config.onBreach === "exit") return clearExitLatchCommand(plan.namespace, plan.prefix);
  const owner = plan.owner;
  return owner
    ? resumeOwnerCommand({ namespace: plan.namespace, owner, pausedKey: plan.keys.paused })
    : `rm ${pauseFilePath}`;
}

/** What follows a breach, in words, by what its latch became. */
function breachThen(g: GateRun, latch: string): string {
  const { config, plan } = g;
  const clear = clearExitLatchCommand(plan.namespace, plan.prefix);
  if (latch === "unlatched") {
    return "the run could not pause itself and stops (exit 5)";
  }
  if (config.onBreach === "exit") {
    return `the run ends once the Jobs in flight finished (exit 5); ` +
      (latch === "latched"
        ? `latched: the next run refuses to start until it is cleared: ${clear}`
        : "the latch is not written yet (tried again)");
  }
  return `the run pauses itself and stays paused; once the fleet is healthy, resume: ${
    liftCommand(g)
  }`;
}

/** The exit latch ConfigMap; a refusal for good is a {@linkcode LatchRefused}. */
async function writeExitLatch(g: GateRun, b: Breach): Promise<void> {
  const { plan, kube } = g;
  try {
    await setExitLatch(kube, {
      namespace: plan.namespace,
      prefix: plan.prefix,
      labels: { [plan.keys.owner]: labelValue(plan.prefix) },
    }, b);
  } catch (e) {
    if (!refusesLatch(e)) throw e;
    throw new LatchRefused(
      `Cannot write the health gate's exit latch ConfigMap ${plan.namespace}/` +
        `${exitLatchName(plan.prefix)}: ${(e as Error).message}; nothing holds the next run: ` +
        `grant create configmaps in ${plan.namespace} (README: RBAC)`,
    );
  }
}

/**
 * The run's pause for a breach (the owner's `<P>/paused`, or the pause
 * file). Refused for good (RBAC, a webhook or policy, the owner gone), the
 * exit latch is written in its place, so that the next run does not roll on
 * once the metric recovered, and the refusal says how to clear it.
 */
async function writePause(g: GateRun, b: Breach): Promise<void> {
  const { plan, kube } = g;
  const owner = plan.owner;
  try {
    if (owner) {
      await pauseOwner({ kube, namespace: plan.namespace, owner, pausedKey: plan.keys.paused }, b);
    } else await pauseFile(g.pauseFilePath!, b);
  } catch (e) {
    if (owner ? !refusesLatch(e) : false) throw e;
    throw await pauseInstead(g, b, e as Error, "refused");
  }
}

/**
 * A pause that cannot be set (refused, or `how` else): the exit latch
 * written in its place, so that the next run does not roll on once the
 * metric recovered; logged with the command that clears it.
 *
 * @returns the refusal that stops the run, in those words
 */
async function pauseInstead(
  g: GateRun,
  b: Breach,
  e: Error,
  how: string,
): Promise<LatchRefused> {
  const { plan, log } = g;
  const owner = plan.owner;
  const where = owner
    ? `PATCH of ${plan.keys.paused} on owner Job ${plan.namespace}/${owner.name} ${how}`
    : `cannot create --pause-file ${g.pauseFilePath}`;
  let held: string;
  try {
    await writeExitLatch(g, b);
    held = `the exit latch holds the next run until it is cleared: ${
      clearExitLatchCommand(plan.namespace, plan.prefix)
    }`;
  } catch (x) {
    held = (x as Error).message;
  }
  const msg = `Cannot pause the run for the health gate's breach: ${where}: ${e.message}; ` +
    `the run stops (exit 5); ${held}`;
  log.error(msg, { event: "gateLatchRefused" });
  return new LatchRefused(msg);
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
 * After a rollout the gate stopped: makes sure the exit latch the next run
 * reads is there (the gate writes it the moment it breaches; a write that
 * failed then is tried once more), and says how to clear it.
 *
 * @returns whether the gate stopped the rollout
 */
export async function latchExit(gate: HealthGate | undefined, g: GateRun): Promise<boolean> {
  const s = gate?.state;
  if (!gate?.stopsBy() || !s || !isBreached(s)) return false;
  const { plan, log } = g;
  // A pause refused left the exit latch already (or said why not); an exit
  // latch that kept failing may be written now that the Jobs in flight
  // finished (a 500 of a webhook or the API gone for a while).
  if (s.kind === "unlatched" && g.config.onBreach !== "exit") return true;
  try {
    if (s.kind === "breached" || s.kind === "unlatched") {
      await writeExitLatch(g, s.breach);
      gate.latchedOutside();
    }
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
