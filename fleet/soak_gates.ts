/**
 * The clusters' health gates through the soak between two stages: each
 * cluster's `--gate-*` (its `gatePrometheusUrl`), measured by the gate a run
 * measures with (gates/gate.ts), latched as a run latches a breach (the
 * pause file, or with `--on-gate-breach exit` the cluster's exit latch
 * ConfigMap), and watched as the engine's waves watch a soak
 * (run/soak_gate.ts `WatchedGate`): clean since when, or what breaks it.
 *
 * @module
 */

import { labelValue, trackingKeys } from "../job.ts";
import type { Kube } from "../kube/client.ts";
import type { Logger } from "../report/log.ts";
import type { RunConfig } from "../run/config.ts";
import { watchOnlyGate } from "../run/run_gate.ts";
import { WatchedGate } from "../run/soak_gate.ts";
import type { HealthGate } from "../gates/gate.ts";
import { clearExitLatchCommand, pauseFile, readExitLatch, setExitLatch } from "../gates/latch.ts";
import { describeBreach } from "../gates/state.ts";
import type { GateWatch } from "../engine/fanout_types.ts";
import type { SoakGates } from "./fleet.ts";

/** One cluster whose gates the soak watches. */
export interface SoakMember {
  /** The cluster (kubeconfig context). */
  name: string;
  /** Its run flags (`gate` set: it has gates). */
  cfg: RunConfig;
  /** Its API client. */
  kube: Kube;
  /** Where its rollout lives. */
  key: { namespace: string; prefix: string };
}

/** One cluster's gate, under way. */
interface Watched {
  name: string;
  gate: HealthGate;
  watched: WatchedGate;
  /** A breach holds on this pause file; undefined: a breach stops the fleet. */
  pauseFile?: string;
}

/**
 * Opens the gates of `members` (those with `--gate-*`) for a soak: an exit
 * latch an earlier breach left in one stops the fleet at once, as it
 * refuses that cluster's next run. Each gate measures once now (a first
 * clean answer counts the soak from the stage's recorded end, as after a
 * re-run of one cluster's waves), then every half interval.
 *
 * @throws {UsageError} for a gate flag that does not fit its URL
 */
export async function openSoakGates(
  members: SoakMember[],
  log: Logger,
  exists: (path: string) => boolean,
): Promise<SoakGates> {
  let latched: { cluster: string; cause: string } | undefined;
  const gates: Watched[] = [];
  const timers: ReturnType<typeof setInterval>[] = [];
  for (const m of members.filter((x) => x.cfg.gate)) {
    const { namespace, prefix } = m.key;
    const said = await readExitLatch(m.kube, namespace, prefix);
    if (said !== undefined) {
      latched ??= {
        cluster: m.name,
        cause: `a health gate stopped an earlier run (${said}); once healthy, clear the latch: ${
          clearExitLatchCommand(namespace, prefix)
        }`,
      };
      continue;
    }
    const w = await openOne(m, log, exists);
    gates.push(w);
    // A measurement's failure is the gate's state (an outage); nothing may reject unheard.
    timers.push(setInterval(() => w.gate.checkNow().catch(() => {}), w.gate.intervalMs / 2));
  }
  return {
    watch: () => watchAll(gates),
    stopsBy: () => latched ?? stopOf(gates),
    onChange: (wake) => gates.forEach((g) => g.watched.onChange(wake)),
    stop: async () => {
      timers.forEach(clearInterval);
      await Promise.all(gates.map((g) => g.gate.stop()));
    },
  };
}

/** One cluster's gate, bound to its latch and measured once. */
async function openOne(
  m: SoakMember,
  log: Logger,
  exists: (path: string) => boolean,
): Promise<Watched> {
  const config = m.cfg.gate!;
  const file = config.onBreach === "exit" ? undefined : m.cfg.maintenance.pauseFile;
  const gate = watchOnlyGate(config, m.kube);
  const { namespace, prefix } = m.key;
  const owner = trackingKeys(m.cfg.trackingLabelPrefix).owner;
  await gate.bind({
    onBreach: (b, latch) => {
      const then = file
        ? `latched: the pause file ${file}; the soak restarts, whole, once a person removes it ` +
          "and every gate is clean"
        : `the fleet stops (exit 5)${
          latch === "latched"
            ? `; its next run refuses until cleared: ${clearExitLatchCommand(namespace, prefix)}`
            : ""
        }`;
      log.warn(
        `fleet: cluster ${m.name}: health gate breached in the soak: ${describeBreach(b)}; ${then}`,
        { event: "fleetSoakBreached", cluster: m.name, query: b.query, value: b.value, latch },
      );
    },
    latch: file
      ? (b) => pauseFile(file, b)
      : (b) =>
        setExitLatch(m.kube, { namespace, prefix, labels: { [owner]: labelValue(prefix) } }, b),
    pauseSeen: file ? () => exists(file) : undefined,
    onHold: ({ state, detail }) =>
      log.info(
        `fleet: cluster ${m.name}: ${detail} (the soak ${
          state === "paused" ? "holds" : "goes on"
        })`,
      ),
  });
  await gate.checkNow();
  // Watched after its first answer: a clean one counts from the stage's end.
  return { name: m.name, gate, watched: new WatchedGate(gate), pauseFile: file };
}

/** Clean since the latest clean stretch of every gate, or what breaks one now (naming its cluster). */
function watchAll(gates: Watched[]): GateWatch {
  let clean: GateWatch = { clean: true, since: -Infinity };
  for (const g of gates) {
    const w = g.watched.watch();
    if (!w.clean) return { clean: false, why: `cluster ${g.name}: ${w.why}` };
    if (clean.clean && w.since > clean.since) {
      clean = { clean: true, since: w.since, after: `cluster ${g.name}: ${w.after}` };
    }
  }
  return clean;
}

/** A breach no pause holds (`exit`, no pause file, a latch refused): the fleet stops. */
function stopOf(gates: Watched[]): { cluster: string; cause: string } | undefined {
  for (const g of gates) {
    const breached = g.gate.breached();
    const cause = g.gate.stopsBy() ??
      (g.pauseFile === undefined && breached
        ? `a health gate was breached: ${breached}`
        : undefined);
    if (cause) return { cluster: g.name, cause };
  }
  return undefined;
}
