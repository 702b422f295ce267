import assert from "node:assert/strict";
import { type DrainConfig, type DrainParts, drainParts } from "./config.ts";
import { parseLabelSelector } from "../nodes/label_selector.ts";

const NONE: DrainConfig = {
  deleteEmptyDirData: false,
  force: false,
  timeoutSecs: 600,
  disableEviction: false,
};

/** What a drain without flags does: kubectl drain's defaults. */
const DEFAULTS: DrainParts = {
  pods: { deleteEmptyDirData: false, force: false, podSelector: undefined },
  evict: { gracePeriodSecs: undefined, disableEviction: false },
};

Deno.test({
  name:
    "drainParts() gives each drain flag to the part that acts on it, and the timeout to neither",
  permissions: "none",
  async fn(t) {
    const selector = { text: "app=web", requirements: parseLabelSelector("app=web") };
    const cases: {
      name: string;
      flags: Partial<DrainConfig>;
      pods?: Partial<DrainParts["pods"]>;
      evict?: Partial<DrainParts["evict"]>;
    }[] = [
      { name: "no flags", flags: {} },
      {
        name: "--delete-emptydir-data sorts the pods",
        flags: { deleteEmptyDirData: true },
        pods: { deleteEmptyDirData: true },
      },
      { name: "--force sorts the pods", flags: { force: true }, pods: { force: true } },
      {
        name: "--pod-selector sorts the pods",
        flags: { podSelector: selector },
        pods: { podSelector: selector },
      },
      {
        name: "--grace-period 30 goes with each eviction",
        flags: { gracePeriodSecs: 30 },
        evict: { gracePeriodSecs: 30 },
      },
      {
        name: "--grace-period 0 goes with each eviction (0 is not the pod's own)",
        flags: { gracePeriodSecs: 0 },
        evict: { gracePeriodSecs: 0 },
      },
      {
        name: "--disable-eviction removes each pod by DELETE",
        flags: { disableEviction: true },
        evict: { disableEviction: true },
      },
      {
        name: "--drain-timeout-secs is the run's deadline, in neither part",
        flags: { timeoutSecs: 5 },
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () =>
        assert.deepEqual(drainParts({ ...NONE, ...c.flags }), {
          pods: { ...DEFAULTS.pods, ...c.pods },
          evict: { ...DEFAULTS.evict, ...c.evict },
        }));
    }
  },
});
