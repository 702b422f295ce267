/**
 * The HTML timeline (`--report-format html`): one self-contained file, no
 * network fetch (a Content-Security-Policy of `default-src 'none'` says so
 * to the browser too), one row per node with bars for its drain, its Job and
 * its post-success verification, coloured by outcome; the spans when starts
 * were paused, each wave's soak and each health gate breach (until its latch
 * was lifted) shaded, each wave's start a line, the reason on hover; and a
 * summary strip on top.
 *
 * The rows are drawn on a canvas, only those in view: 10,000 nodes as DOM
 * elements would be 40,000 of them, and scroll like it. The data is
 * embedded once as compact JSON (times in ms from the run's start).
 *
 * Pure: {@linkcode htmlTimeline} returns the text.
 *
 * @module
 */

import type { DispatchEvent } from "../engine/fanout.ts";
import { outcomeCounts, type ReportInput } from "./report.ts";

/** A span when starts were paused, and by what. */
export interface PauseSpan {
  /** When it began (ms since the epoch). */
  from: number;
  /** When it ended; open until the run's end. */
  to?: number;
  /** What paused: the user's gate, or the API. */
  why: string;
}

/**
 * Collects the pause spans of a run from the engine's events (the user's
 * pause and resume notices, API outages), for the timeline and the report.
 *
 * A person's pause (the owner's annotation, the pause file, a gate's latch)
 * and an API outage are spans of their own, each closed only by its own
 * end: they overlap (the API server may go away while a person holds the
 * run), and the engine says the API's return while the person's pause
 * still holds every start.
 */
export class PauseSpans {
  /** The spans so far, in the order they began. */
  readonly spans: PauseSpan[] = [];
  #open: { user?: PauseSpan; api?: PauseSpan } = {};
  #now: () => number;

  /** @param now the clock, in ms since the epoch */
  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** One engine event. */
  event(e: DispatchEvent): void {
    if (e.kind === "notice") {
      const user = e.message.match(/^paused by (.+?): no new Job/);
      if (user) this.#begin("user", `paused by ${user[1]}`);
      else if (e.message.startsWith("resumed")) this.#end("user");
    } else if (e.kind === "api") {
      if (e.state === "paused") this.#begin("api", `API: ${e.detail}`);
      else this.#end("api");
    }
  }

  #begin(source: "user" | "api", why: string): void {
    if (this.#open[source]) return; // a new reason for the same pause
    const span = { from: this.#now(), why };
    this.#open[source] = span;
    this.spans.push(span);
  }

  #end(source: "user" | "api"): void {
    const span = this.#open[source];
    if (span) span.to = this.#now();
    this.#open[source] = undefined;
  }
}

const OUTCOME_CODES: Record<string, number> = {
  succeeded: 0,
  failed: 1,
  unknown: 2,
  blocked: 3,
  inFlight: 4,
  notStarted: 5,
  skipped: 6,
};

/** The rows as compact arrays: [name, outcome, drainFrom, drainTo, jobFrom, jobTo, end, reason]. */
function rows(r: ReportInput, t0: number): unknown[][] {
  const rel = (ms?: number) => (ms === undefined ? -1 : Math.max(0, Math.round(ms - t0)));
  return [
    ...r.results.map((x) => [
      x.node,
      OUTCOME_CODES[x.outcome],
      rel(x.drainStartedAt),
      rel(x.drainEndedAt),
      rel(x.startedAt),
      rel(x.jobEndedAt ?? x.finishedAt),
      rel(x.finishedAt),
      x.reason ?? "",
    ]),
    ...r.skipped.map((s) => [s.node, OUTCOME_CODES.skipped, -1, -1, -1, -1, -1, s.reason]),
  ];
}

/** A span of the run, relative to its start: `[from, to, why]`. */
type Band = [number, number, string];

/** Each wave's soak, from its end to the soak's end. */
function soaks(r: ReportInput, t0: number, end: number): Band[] {
  return (r.waves ?? []).filter((w) => w.endedAt !== undefined && w.soakEndsAt !== undefined)
    .map((w) => {
      const to = w.soakEndedAt ?? Math.min(w.soakEndsAt!, end);
      const secs = Math.round((to - w.endedAt!) / 1000);
      return [w.endedAt! - t0, to - t0, `wave ${w.wave} soak: ${secs} s after its last node`];
    });
}

/** Each gate breach, from when it was seen to when its latch was lifted (or the end). */
function breaches(r: ReportInput, t0: number, end: number): Band[] {
  const at = (ms: number) => new Date(ms).toISOString().slice(11, 19);
  return (r.breaches ?? []).map((b) => {
    const latch = b.latchedAt === undefined
      ? ""
      : `; latched ${at(b.latchedAt)}${r.latch ? ` (${r.latch})` : ""}, ${
        b.liftedAt === undefined ? "never lifted" : `lifted ${at(b.liftedAt)}`
      }`;
    return [
      b.at - t0,
      (b.liftedAt ?? end) - t0,
      `health gate breached ${at(b.at)}: query ${
        JSON.stringify(b.query)
      } returned ${b.value}${latch}`,
    ];
  });
}

/** Where each wave after the first opened: `[at, label]`. */
function waveLines(r: ReportInput, t0: number): [number, string][] {
  const n = r.waves?.length ?? 0;
  return (r.waves ?? []).filter((w) => w.openedAt !== undefined)
    .map((w) => [w.openedAt! - t0, `wave ${w.wave}/${n} (${w.size})`]);
}

/** JSON that may stand inside a `<script>` element: no `</script>`, no `<!--`. */
function scriptJson(value: unknown): string {
  return JSON.stringify(value).replace(/</g, "\\u003c").replace(/\u2028/g, "\\u2028").replace(
    /\u2029/g,
    "\\u2029",
  );
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** One lane's data, times in ms from the page's start `t0`. */
function laneData(r: ReportInput, t0: number) {
  const end = r.finishedAt.getTime();
  return {
    rows: rows(r, t0),
    pauses: (r.pauses ?? []).map((p) => [p.from - t0, (p.to ?? end) - t0, p.why]),
    soaks: soaks(r, t0, end),
    breaches: breaches(r, t0, end),
    waves: waveLines(r, t0),
    counts: { ...outcomeCounts(r.results), skipped: r.skipped.length },
    stoppedBy: r.stoppedBy ?? null,
  };
}

/**
 * The timeline of a run as one HTML file: `r.pauses` ({@linkcode PauseSpans}),
 * the waves' soaks and the gate's breaches shaded, the waves' starts lines.
 */
export function htmlTimeline(r: ReportInput): string {
  const t0 = r.startedAt.getTime();
  return page({
    title: `${r.namespace}/${r.prefix}`,
    startedAt: r.startedAt.toISOString(),
    durationMs: r.finishedAt.getTime() - t0,
    ...laneData(r, t0),
  });
}

/** One lane of {@linkcode htmlLanes}: a titled band of a run's node rows. */
export interface Lane {
  /** Its heading (a cluster and its stage). */
  title: string;
  /** Its run, when there is one to draw. */
  input?: ReportInput;
  /** A word on the heading (why there is no run to draw). */
  note?: string;
}

/** Several runs on one time axis, for {@linkcode htmlLanes}. */
export interface LanesPage {
  /** The page's title. */
  title: string;
  /** The lanes, top to bottom. */
  lanes: Lane[];
  /** Lines across every lane: `{ at, label }` (ms since the epoch). */
  marks: { at: number; label: string }[];
  /** Spans shaded across every lane (a soak between stages): ms since the epoch. */
  bands: { from: number; to: number; why: string }[];
  /** Why the whole stopped, if it did. */
  stoppedBy?: string;
  /** What the marks and bands are, for the legend. */
  legend: string;
}

/**
 * Several runs (a fleet's clusters) as one HTML timeline: one lane per run,
 * each the rows, pauses, soaks, breaches and waves the single run's page
 * draws, on one time axis from the earliest start, with the page's own
 * lines and bands across every lane.
 */
export function htmlLanes(p: LanesPage): string {
  const runs = p.lanes.flatMap((l) => (l.input ? [l.input] : []));
  const t0 = Math.min(...runs.map((r) => r.startedAt.getTime()), ...p.marks.map((m) => m.at));
  const end = Math.max(...runs.map((r) => r.finishedAt.getTime()), ...p.bands.map((b) => b.to));
  const start = Number.isFinite(t0) ? t0 : Date.now();
  const empty = { rows: [], pauses: [], soaks: [], breaches: [], waves: [], counts: {} };
  const lanes = p.lanes.map((l) => ({
    title: l.title,
    note: l.note ?? null,
    ...(l.input ? laneData(l.input, start) : { ...empty, stoppedBy: null }),
  }));
  const counts: Record<string, number> = {};
  for (const l of lanes) {
    for (const [k, n] of Object.entries(l.counts)) counts[k] = (counts[k] ?? 0) + n;
  }
  return page({
    title: p.title,
    startedAt: new Date(start).toISOString(),
    durationMs: Math.max(0, (Number.isFinite(end) ? end : start) - start),
    lanes,
    counts,
    stoppedBy: p.stoppedBy ?? null,
    marks: p.marks.map((m) => [m.at - start, m.label]),
    bands: p.bands.map((b) => [b.from - start, b.to - start, b.why]),
    legend: p.legend,
  });
}

/** The page around its data: one lane at the top level, or `lanes`. */
function page(data: { title: string } & Record<string, unknown>): string {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>job-dispatcher timeline: ${escapeHtml(data.title)}</title>
<style>${STYLE}</style>
</head>
<body>
<header id="summary"></header>
<div id="axis"><canvas id="axis-canvas" height="24"></canvas></div>
<div id="scroll"><canvas id="rows"></canvas><div id="spacer"></div></div>
<div id="tip" hidden></div>
<script type="application/json" id="data">${scriptJson(data)}</script>
<script>${SCRIPT}</script>
</body>
</html>
`;
}

const STYLE = `
:root { --row: 16px; --name: 240px; font: 13px system-ui, sans-serif; color: #1f2328; }
body { margin: 0; display: flex; flex-direction: column; height: 100vh; }
header { padding: 8px 12px; border-bottom: 1px solid #d0d7de; }
header h1 { font-size: 15px; margin: 0 0 6px; }
.strip { display: flex; height: 14px; border-radius: 3px; overflow: hidden; margin: 4px 0; }
.strip span { display: block; height: 100%; }
.legend span { margin-right: 12px; white-space: nowrap; }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; vertical-align: -1px; }
#axis { height: 24px; border-bottom: 1px solid #d0d7de; }
#scroll { flex: 1; overflow-y: auto; overflow-x: hidden; position: relative; }
#rows { position: sticky; top: 0; left: 0; display: block; }
#tip { position: fixed; pointer-events: none; background: #fff; border: 1px solid #8c959f;
  padding: 4px 6px; max-width: 480px; box-shadow: 0 2px 6px #0003; white-space: pre-wrap; }
`;

/**
 * The page's script: the summary, the axis, and the rows in view drawn on
 * scroll. A page of several runs (`D.lanes`) draws each as a lane under a
 * heading row, its own spans shaded over its rows only.
 */
const SCRIPT = `
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const ROW = 16, NAME = 240;
const OUT = ["succeeded", "failed", "unknown", "blocked", "in flight", "not started", "skipped"];
const COLOR = ["#2da44e", "#cf222e", "#bf8700", "#8250df", "#0969da", "#afb8c1", "#d0d7de"];
const VERIFY = ["#7ee2a8", "#ff9492", "#eac54f", "#c297ff", "#80ccff", "#d0d7de", "#eaeef2"];
const DRAIN = "#57606a";
const BANDS = [["pauses", "#0969da1c"], ["soaks", "#bf870026"], ["breaches", "#cf222e2e"]];
// One run is one lane without a heading; each lane's display rows are [lane, row], a heading [lane].
const LANES = D.lanes || [D], ROWS = [];
LANES.forEach((l, k) => {
  l.first = ROWS.length;
  if (D.lanes) ROWS.push([k]);
  for (const r of l.rows) ROWS.push([k, r]);
  l.end = ROWS.length;
});
const NODES = LANES.reduce((n, l) => n + l.rows.length, 0);
const MARKS = D.marks || [], SPANS = D.bands || [];
const AXIS = MARKS.concat(D.lanes ? [] : D.waves);
const fmt = (ms) => { const s = Math.round(ms / 1000); return s < 60 ? s + "s" : s < 3600 ? Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s" : Math.floor(s / 3600) + "h" + String(Math.floor(s % 3600 / 60)).padStart(2, "0") + "m"; };
function summary() {
  const h = document.getElementById("summary");
  const total = NODES || 1;
  const c = D.counts, parts = [["succeeded", c.succeeded, 0], ["failed", c.failed, 1], ["unknown", c.unknown, 2],
    ["blocked", c.blocked, 3], ["in flight", c.inFlight, 4], ["not started", c.notStarted, 5], ["skipped", c.skipped, 6]];
  const title = document.createElement("h1");
  title.textContent = D.title + ": " + NODES + " nodes in " + fmt(D.durationMs) + ", started " + D.startedAt +
    (D.stoppedBy ? " (stopped: " + D.stoppedBy + ")" : "");
  const strip = document.createElement("div"); strip.className = "strip";
  const legend = document.createElement("div"); legend.className = "legend";
  for (const [name, n, k] of parts) {
    if (!n) continue;
    const s = document.createElement("span"); s.style.width = (100 * n / total) + "%"; s.style.background = COLOR[k];
    s.title = n + " " + name; strip.append(s);
    const l = document.createElement("span"); const i = document.createElement("i"); i.style.background = COLOR[k];
    l.append(i, n + " " + name); legend.append(l);
  }
  const keys = document.createElement("span");
  keys.textContent = "bars: drain (dark), Job (outcome), verification (light); shaded: paused (blue), " +
    "soak (amber), health gate breach (red); lines: a wave opens" + (D.legend ? "; " + D.legend : "");
  legend.append(keys);
  h.append(title, strip, legend);
}
const scroll = document.getElementById("scroll"), canvas = document.getElementById("rows");
const axis = document.getElementById("axis-canvas"), tip = document.getElementById("tip");
const ctx = canvas.getContext("2d");
let scale = 1;
function layout() {
  const dpr = window.devicePixelRatio || 1;
  const w = scroll.clientWidth, h = scroll.clientHeight;
  document.getElementById("spacer").style.height = Math.max(0, ROWS.length * ROW - h) + "px";
  for (const [c, ch] of [[canvas, h], [axis, 24]]) {
    c.width = w * dpr; c.height = ch * dpr; c.style.width = w + "px"; c.style.height = ch + "px";
    c.getContext("2d").setTransform(dpr, 0, 0, dpr, 0, 0);
  }
  scale = (w - NAME - 8) / Math.max(1, D.durationMs);
  drawAxis(w); draw();
}
const x = (ms) => NAME + ms * scale;
function drawAxis(w) {
  const a = axis.getContext("2d");
  a.clearRect(0, 0, w, 24); a.fillStyle = "#57606a"; a.font = "11px system-ui";
  const step = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200].map((s) => s * 1000)
    .find((s) => s * scale >= 70) || 14400000;
  for (let t = 0; t <= D.durationMs; t += step) { a.fillRect(x(t), 16, 1, 8); a.fillText(fmt(t), x(t) + 2, 12); }
  a.fillStyle = "#9a6700";
  for (const [at, label] of AXIS) { a.fillRect(x(at), 0, 2, 24); a.fillText(label, x(at) + 4, 22); }
}
// Each lane's own shading and wave lines, over its rows only (clipped to the view).
function shadeLanes(top, first, last, h) {
  for (const l of LANES) {
    if (l.end <= first || l.first >= last) continue;
    const y0 = Math.max(0, top(l.first)), y1 = Math.min(h, top(l.end));
    for (const [key, color] of BANDS) {
      ctx.fillStyle = color;
      for (const [from, to] of l[key]) ctx.fillRect(x(from), y0, Math.max(1, (to - from) * scale), y1 - y0);
    }
    ctx.fillStyle = "#9a6700";
    for (const [at] of l.waves) ctx.fillRect(x(at), y0, 2, y1 - y0);
  }
}
function heading(l, y, w) {
  ctx.fillStyle = "#eaeef2"; ctx.fillRect(0, y, w, ROW);
  ctx.fillStyle = "#1f2328"; ctx.font = "bold 12px system-ui";
  ctx.fillText(l.title + (l.note ? " (" + l.note + ")" : "") + (l.stoppedBy ? " (stopped: " + l.stoppedBy + ")" : ""), 4, y + ROW / 2);
  ctx.font = "12px system-ui";
}
let drawn = 0;
function draw() {
  const w = scroll.clientWidth, h = scroll.clientHeight;
  ctx.clearRect(0, 0, w, h);
  const first = Math.floor(scroll.scrollTop / ROW), last = Math.min(ROWS.length, first + Math.ceil(h / ROW) + 1);
  const top = (i) => (i - first) * ROW - (scroll.scrollTop % ROW);
  ctx.fillStyle = "#f6f8fa";
  for (let i = first; i < last; i++) if (i % 2) ctx.fillRect(0, top(i), w, ROW);
  // The shading over the stripes, under the bars: the page's spans every row, a lane's its own.
  ctx.fillStyle = "#bf870026";
  for (const [from, to] of SPANS) ctx.fillRect(x(from), 0, Math.max(1, (to - from) * scale), h);
  shadeLanes(top, first, last, h);
  ctx.fillStyle = "#1f2328";
  for (const [at] of MARKS) ctx.fillRect(x(at), 0, 2, h);
  ctx.font = "12px system-ui"; ctx.textBaseline = "middle";
  for (let i = first; i < last; i++) {
    const [k, row] = ROWS[i];
    const y = top(i);
    if (!row) { heading(LANES[k], y, w); continue; }
    const [name, out, d0, d1, j0, j1, end] = row;
    ctx.fillStyle = "#1f2328"; ctx.fillText(name.length > 34 ? name.slice(0, 33) + "…" : name, 4, y + ROW / 2);
    if (d0 >= 0) { ctx.fillStyle = DRAIN; ctx.fillRect(x(d0), y + 4, Math.max(1, ((d1 >= 0 ? d1 : j0) - d0) * scale), ROW - 8); }
    if (j0 >= 0) {
      const stop = j1 >= 0 ? j1 : D.durationMs;
      ctx.fillStyle = COLOR[out]; ctx.fillRect(x(j0), y + 2, Math.max(2, (stop - j0) * scale), ROW - 4);
      if (end > stop) { ctx.fillStyle = VERIFY[out]; ctx.fillRect(x(stop), y + 2, Math.max(1, (end - stop) * scale), ROW - 4); }
    } else if (out !== 0) { ctx.fillStyle = COLOR[out]; ctx.fillRect(NAME - 10, y + 4, 6, ROW - 8); }
  }
  drawn = last - first;
  document.body.dataset.rows = String(NODES);
  document.body.dataset.drawn = String(drawn);
}
function hover(ev) {
  const r = canvas.getBoundingClientRect();
  const i = Math.floor((ev.clientY - r.top + scroll.scrollTop) / ROW);
  const at = (ev.clientX - r.left - NAME) / scale, slack = 3 / scale;
  const [k, row] = ROWS[i] || [];
  const l = LANES[k];
  const near = (list) => list.filter(([w]) => Math.abs(at - w) <= slack);
  const spans = (l ? BANDS.flatMap(([key]) => l[key]) : []).concat(SPANS).filter(([a, b]) => at >= a && at <= b)
    .map((s) => s[2]).concat(near(l ? l.waves : []).map((w) => w[1] + " opens"), near(MARKS).map((m) => m[1]));
  if (!l && !spans.length) { tip.hidden = true; return; }
  const t = (ms) => (ms >= 0 ? "+" + fmt(ms) : "-");
  let text = "";
  if (row) {
    const [name, out, d0, d1, j0, j1, end, reason] = row;
    text = name + ": " + OUT[out] + (reason ? "\\n" + reason : "") +
      (d0 >= 0 ? "\\ndrain " + t(d0) + " → " + t(d1) : "") + (j0 >= 0 ? "\\nJob " + t(j0) + " → " + t(j1) : "") +
      (end > j1 && j1 >= 0 ? "\\nverified " + t(end) : "");
  } else if (l) {
    text = l.title + (l.note ? "\\n" + l.note : "") + (l.stoppedBy ? "\\nstopped: " + l.stoppedBy : "");
  }
  tip.textContent = [text, ...spans].filter(Boolean).join("\\n");
  tip.style.left = Math.min(ev.clientX + 12, innerWidth - 490) + "px"; tip.style.top = (ev.clientY + 12) + "px";
  tip.hidden = false;
}
summary();
window.addEventListener("resize", layout);
scroll.addEventListener("scroll", () => requestAnimationFrame(draw), { passive: true });
canvas.addEventListener("mousemove", hover);
canvas.addEventListener("mouseleave", () => (tip.hidden = true));
layout();
`;
