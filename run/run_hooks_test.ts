import assert from "node:assert/strict";
import type { V1Node } from "@kubernetes/client-node";
import { afterSuccess, anyPaused } from "./run_hooks.ts";
import type { PauseGate } from "../engine/pause.ts";
import type { NodeWriter } from "../nodes/node_writer.ts";
import type { Maintenance } from "../maintenance/maintenance.ts";
import type { NodeVerifier } from "../verify/verify.ts";

/** A pause gate that says what it is told, and counts who listens. */
function gate(by: string | undefined) {
  const wakes: (() => void)[] = [];
  const g: PauseGate = { pausedBy: () => by, onChange: (wake) => void wakes.push(wake) };
  return { g, wakes };
}

Deno.test({
  name: "anyPaused() pauses while any gate says so, with the first one's reason",
  permissions: "none",
  async fn(t) {
    await t.step("no gates: no pause at all", () => assert.equal(anyPaused([]), undefined));
    const cases: [string, (string | undefined)[], string | undefined][] = [
      ["one gate, open", [undefined], undefined],
      ["one gate, paused", ["owner"], "owner"],
      ["the second paused", [undefined, "file"], "file"],
      ["both paused: the first", ["owner", "file"], "owner"],
    ];
    for (const [what, says, want] of cases) {
      await t.step(what, () => {
        const gates = says.map(gate);
        const pause = anyPaused(gates.map((x) => x.g))!;
        assert.equal(pause.pausedBy(), want);
        const wake = () => {};
        pause.onChange(wake);
        assert.deepEqual(gates.map((x) => x.wakes), gates.map(() => [wake]));
      });
    }
  },
});

Deno.test({
  name:
    "afterSuccess() verifies the node before the uncordon; a failed verification leaves it cordoned",
  permissions: "none",
  async fn() {
    const calls: string[] = [];
    const writer = { hasAfter: false } as unknown as NodeWriter;
    const maintenance = {
      afterSuccess: () => {
        calls.push("uncordon");
        return Promise.resolve(undefined);
      },
    } as unknown as Maintenance;
    const verdicts = new Map([["n1", undefined], [
      "n2",
      "verification: pod gpu/v not Ready after 5 s",
    ]]);
    const verifier = {
      verify: (node: { name: string }, jobEndedAt: number) => {
        calls.push(`verify ${node.name} ${jobEndedAt}`);
        return Promise.resolve(verdicts.get(node.name));
      },
    } as unknown as NodeVerifier;
    const work = afterSuccess(writer, maintenance, () => ({}) as V1Node, verifier)!;
    const target = (name: string) => ({
      node: { name, uid: name },
      name: `up-${name}`,
      job: () => ({}),
    });
    assert.equal(await work(target("n1"), 5_000), undefined);
    assert.equal(await work(target("n2"), 7_000), "verification: pod gpu/v not Ready after 5 s");
    assert.deepEqual(calls, ["verify n1 5000", "uncordon", "verify n2 7000"]);
  },
});

Deno.test({
  name: "afterSuccess() keeps the success on the node before any work, and removes it only " +
    "once the work succeeded",
  permissions: "none",
  async fn() {
    const calls: string[] = [];
    const writer = { hasAfter: false } as unknown as NodeWriter;
    const maintenance = {
      afterSuccess: (node: { name: string }) => {
        calls.push(`uncordon ${node.name}`);
        return Promise.resolve(node.name === "n2" ? "cannot uncordon" : undefined);
      },
    } as unknown as Maintenance;
    const kept = {
      keep: (t: { node: { name: string } }) => {
        calls.push(`keep ${t.node.name}`);
        return Promise.resolve();
      },
      release: (t: { node: { name: string } }) => {
        calls.push(`release ${t.node.name}`);
        return Promise.resolve();
      },
    };
    const work = afterSuccess(writer, maintenance, () => ({}) as V1Node, undefined, kept)!;
    const target = (name: string) => ({
      node: { name, uid: name },
      name: `up-${name}`,
      job: () => ({}),
    });
    assert.equal(await work(target("n1"), 0), undefined);
    assert.equal(await work(target("n2"), 0), "cannot uncordon");
    assert.deepEqual(calls, ["keep n1", "uncordon n1", "release n1", "keep n2", "uncordon n2"]);
    // An outage while keeping it: no work is done without its mark.
    calls.length = 0;
    const down = { ...kept, keep: () => Promise.reject(new Error("connection refused")) };
    const held = afterSuccess(writer, maintenance, () => ({}) as V1Node, undefined, down)!;
    await assert.rejects(held(target("n3"), 0), /connection refused/);
    assert.deepEqual(calls, []);
  },
});
