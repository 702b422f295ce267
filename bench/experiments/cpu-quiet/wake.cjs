// The Node.js twin of wake.ts: a timer every 20 ms for 10 s, CPU per wake.
const fs = require("fs");
const cpuMs = () => {
  const f = fs.readFileSync("/proc/self/stat", "utf8").split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
};
const before = cpuMs();
let wakes = 0;
const timer = setInterval(() => wakes++, 20);
setTimeout(() => {
  clearInterval(timer);
  const used = cpuMs() - before;
  console.log(`node: ${wakes} wakes, ${used} ms of CPU, ${(used / wakes).toFixed(3)} ms a wake`);
}, 10_000);
