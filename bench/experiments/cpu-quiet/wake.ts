/**
 * What one wake of an idle process costs on this machine: a timer every
 * 20 ms for 10 s, nothing else; prints the CPU (utime + stime from /proc)
 * per wake. The same in Node.js (`node wake.cjs`) for comparison.
 *
 * ```sh
 * deno run --allow-all --v8-flags=--max-semi-space-size=2,--optimize-for-size wake.ts
 * ```
 */

function cpuMs(): number {
  const fields = Deno.readTextFileSync("/proc/self/stat").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

const before = cpuMs();
let wakes = 0;
const timer = setInterval(() => wakes++, 20);
await new Promise((resolve) => setTimeout(resolve, 10_000));
clearInterval(timer);
const used = cpuMs() - before;
console.log(`deno: ${wakes} wakes, ${used} ms of CPU, ${(used / wakes).toFixed(3)} ms a wake`);
