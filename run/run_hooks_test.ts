import assert from "node:assert/strict";
import { anyPaused } from "./run_hooks.ts";
import type { PauseGate } from "../engine/pause.ts";

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
