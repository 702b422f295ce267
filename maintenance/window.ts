/**
 * Maintenance windows (`--window "Mon-Fri 02:00-04:00 Europe/Berlin"`): when
 * a new Job may start. Wall-clock times in an IANA zone, converted with
 * `Intl.DateTimeFormat`, so a window keeps its local hours across daylight
 * saving changes. Instants are epoch milliseconds, as `Clock.now()`.
 *
 * @module
 */

import { UsageError } from "../job.ts";

/** One parsed `--window`. */
export interface Window {
  /** The spec as given, for messages. */
  spec: string;
  /** Days on which the window opens, 0 = Sunday … 6 = Saturday. */
  days: ReadonlySet<number>;
  /** Opening, in minutes after local midnight (0 … 1439). */
  startMin: number;
  /** Closing, in minutes after local midnight (1 … 1440); at or before `startMin`: the next day. */
  endMin: number;
  /** IANA time zone. @default "UTC" */
  zone: string;
}

const DAY_NAMES = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
const DAY_MS = 86_400_000;
const FIX = "expected DAYS HH:MM-HH:MM [ZONE], e.g. Mon-Fri 02:00-04:00 Europe/Berlin";

function usage(spec: string, detail: string): UsageError {
  return new UsageError(`Invalid --window ${JSON.stringify(spec)}: ${detail}`);
}

function parseDays(spec: string, text: string): Set<number> {
  if (text === "*") return new Set([0, 1, 2, 3, 4, 5, 6]);
  const days = new Set<number>();
  const dayOf = (name: string) => {
    const d = DAY_NAMES.indexOf(name.toLowerCase());
    if (d < 0) {
      throw usage(
        spec,
        `unknown day ${JSON.stringify(name)}; use Mon, Tue, Wed, Thu, Fri, Sat, Sun, ` +
          "a range such as Mon-Fri, a list such as Sat,Sun, or * for every day",
      );
    }
    return d;
  };
  for (const item of text.split(",")) {
    const [from, to, extra] = item.split("-");
    if (extra !== undefined) throw usage(spec, `day range ${JSON.stringify(item)} has two dashes`);
    const first = dayOf(from);
    const last = to === undefined ? first : dayOf(to);
    // A range wraps past Sunday: Fri-Mon is Fri, Sat, Sun, Mon.
    for (let d = first;; d = (d + 1) % 7) {
      days.add(d);
      if (d === last) break;
    }
  }
  return days;
}

function parseMinutes(spec: string, text: string, end: boolean): number {
  const m = text.match(/^(\d\d):(\d\d)$/);
  const minutes = m ? Number(m[1]) * 60 + Number(m[2]) : NaN;
  const max = end ? 1440 : 1439;
  if (!m || Number(m[2]) > 59 || minutes > max) {
    throw usage(
      spec,
      `bad time ${JSON.stringify(text)}; use HH:MM from 00:00 to 23:59${end ? " (or 24:00)" : ""}`,
    );
  }
  return minutes;
}

/** Whether `zone` is a time zone `Intl` knows (IANA names, `UTC`). */
function knownZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

/**
 * Parses one `--window` spec: days (`Mon-Fri`, `Sat,Sun`, `Fri-Mon`, `*`),
 * an HH:MM-HH:MM span (`22:00-02:00` crosses midnight and belongs to the day
 * it opens on; `00:00-24:00` is the whole day) and an optional IANA zone.
 * Without a zone the window is in UTC, as kured's `--time-zone`: the same
 * command must mean the same hours on a laptop and in a pod.
 *
 * @throws {UsageError} naming the spec, what is wrong and the expected form
 * @example
 * ```ts
 * parseWindow("Sat,Sun 22:00-02:00 Europe/Berlin").endMin; // 120
 * ```
 */
export function parseWindow(spec: string): Window {
  const parts = spec.trim().split(/\s+/);
  if (parts.length < 2 || parts.length > 3) throw usage(spec, FIX);
  const [dayText, span, zone = "UTC"] = parts;
  const days = parseDays(spec, dayText);
  const times = span.split("-");
  if (times.length !== 2) throw usage(spec, `bad time span ${JSON.stringify(span)}; ${FIX}`);
  const startMin = parseMinutes(spec, times[0], false);
  const endMin = parseMinutes(spec, times[1], true);
  if (startMin === endMin) {
    throw usage(spec, "it opens and closes at the same time; for a whole day use 00:00-24:00");
  }
  if (!knownZone(zone)) {
    throw usage(
      spec,
      `unknown time zone ${JSON.stringify(zone)}; give an IANA zone such as Europe/Berlin or UTC`,
    );
  }
  return { spec, days, startMin, endMin, zone };
}

const FORMATS = new Map<string, Intl.DateTimeFormat>();

/** The wall clock of `zone` at instant `t`, as if it were UTC (epoch ms). */
function wallClock(t: number, zone: string): number {
  let f = FORMATS.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone: zone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    FORMATS.set(zone, f);
  }
  const p: Record<string, number> = {};
  for (const { type, value } of f.formatToParts(t)) p[type] = Number(value);
  return Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second) +
    (((t % 1000) + 1000) % 1000);
}

/**
 * The first instant at which `zone`'s wall clock reads `wall` or later (a
 * wall time written as UTC epoch ms). A time that happens twice (clocks go
 * back) is the earlier. A time skipped (clocks go forward) is the transition
 * itself: 02:30 on a spring-forward night in Berlin is 03:00 CEST, the first
 * moment the clocks read past 02:30. Temporal's "compatible" mode would move
 * it forward by the gap (03:30), which turns `02:30-03:30` into an empty
 * window and loses the night, though 03:00-03:30 local exists.
 *
 * @example
 * ```ts
 * instantOf(Date.UTC(2026, 2, 29, 2, 30), "Europe/Berlin"); // Date.UTC(2026, 2, 29, 1, 0)
 * ```
 */
export function instantOf(wall: number, zone: string): number {
  const before = wall - wallClock(wall - DAY_MS, zone) + (wall - DAY_MS);
  const after = wall - wallClock(wall + DAY_MS, zone) + (wall + DAY_MS);
  // `before`/`after`: the instant under the offset a day earlier/later.
  const fits = [before, after].filter((t) => wallClock(t, zone) === wall);
  if (fits.length) return Math.min(...fits);
  return transition(Math.min(before, after), Math.max(before, after), wall, zone);
}

/**
 * In a gap, the first instant in [lo, hi] whose wall clock reads `wall` or
 * later: the clocks read before the gap at `lo` and past it at `hi`, and jump
 * once in between, so a binary search to the millisecond finds the jump.
 */
function transition(lo: number, hi: number, wall: number, zone: string): number {
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (wallClock(mid, zone) >= wall) hi = mid;
    else lo = mid;
  }
  return hi;
}

/** One opening of a window: [start, end) in epoch ms. */
interface Opening {
  start: number;
  end: number;
}

/** The openings of `w` that begin on the local days from `t`'s day - 1 to + `daysAhead`. */
function openings(w: Window, t: number, daysAhead: number): Opening[] {
  const wall = wallClock(t, w.zone);
  const today = wall - (((wall % DAY_MS) + DAY_MS) % DAY_MS);
  const out: Opening[] = [];
  for (let i = -1; i <= daysAhead; i++) {
    const day = today + i * DAY_MS;
    if (!w.days.has(new Date(day).getUTCDay())) continue;
    const endDay = w.endMin <= w.startMin ? day + DAY_MS : day;
    const start = instantOf(day + w.startMin * 60_000, w.zone);
    const end = instantOf(endDay + w.endMin * 60_000, w.zone);
    if (end > start) out.push({ start, end });
  }
  return out;
}

/**
 * Whether some window is open at `t`.
 *
 * @example
 * ```ts
 * inWindow([parseWindow("* 02:00-04:00 UTC")], Date.parse("2026-06-01T03:00:00Z")); // true
 * ```
 */
export function inWindow(windows: readonly Window[], t: number): boolean {
  return windows.some((w) => openings(w, t, 0).some((o) => o.start <= t && t < o.end));
}

/**
 * The first instant at or after `t` at which some window is open: `t` itself
 * while one is open; undefined without windows.
 *
 * @example
 * ```ts
 * nextOpening([parseWindow("Mon 02:00-04:00")], Date.parse("2026-06-01T05:00:00Z"));
 * // Date.parse("2026-06-08T02:00:00Z")
 * ```
 */
export function nextOpening(windows: readonly Window[], t: number): number | undefined {
  return firstOpening(windows, t)?.at;
}

/** The first instant at or after `t` at which some window is open, and that window. */
function firstOpening(
  windows: readonly Window[],
  t: number,
): { at: number; window: Window } | undefined {
  let best: { at: number; window: Window } | undefined;
  for (const w of windows) {
    for (const o of openings(w, t, 7)) {
      if (o.end <= t) continue;
      const at = Math.max(o.start, t);
      if (best === undefined || at < best.at) best = { at, window: w };
    }
  }
  return best;
}

/**
 * Says when the windows next open, after `t`: the weekday and time in the
 * zone of the window that opens, as the user wrote it, then UTC, then how
 * long from `t`. A raw UTC timestamp would make the user convert it back to
 * the zone they wrote the window in. undefined without windows.
 *
 * @example
 * ```ts
 * describeNextOpening([parseWindow("Mon 02:00-04:00 Europe/Berlin")], Date.parse("2026-06-01T05:00:00Z"));
 * // "Mon 02:00 Europe/Berlin (00:00Z), in 6d19h"
 * ```
 */
export function describeNextOpening(windows: readonly Window[], t: number): string | undefined {
  const first = firstOpening(windows, t);
  if (!first) return undefined;
  const { at, window: { zone } } = first;
  const local = dayAndTime(wallClock(at, zone));
  const utc = dayAndTime(at);
  // The UTC day only when it differs: "Mon 00:30 Europe/Berlin (Sun 22:30Z)".
  const inUtc = zone === "UTC"
    ? ""
    : ` (${utc.slice(0, 3) === local.slice(0, 3) ? utc.slice(4) : utc}Z)`;
  return `${local} ${zone}${inUtc}, ${fromNow(at - t)}`;
}

/** `Mon 02:00` of a wall time written as UTC epoch ms. */
function dayAndTime(wall: number): string {
  const d = new Date(wall);
  const name = DAY_NAMES[d.getUTCDay()];
  const two = (n: number) => String(n).padStart(2, "0");
  return `${name[0].toUpperCase()}${name.slice(1)} ${two(d.getUTCHours())}:${
    two(d.getUTCMinutes())
  }`;
}

/** `in 45m`, `in 3h20m`, `in 6d19h`: to the minute, rounded up; `now` at 0. */
function fromNow(ms: number): string {
  const min = Math.ceil(ms / 60_000);
  if (min <= 0) return "now";
  if (min < 60) return `in ${min}m`;
  if (min < 1440) return `in ${Math.floor(min / 60)}h${String(min % 60).padStart(2, "0")}m`;
  return `in ${Math.floor(min / 1440)}d${Math.floor((min % 1440) / 60)}h`;
}

/**
 * When the windows open at `t` close: the end of the open span containing
 * `t`, following windows that overlap or adjoin (`Mon 22:00-24:00` and
 * `Tue 00:00-02:00` close at Tue 02:00). undefined when no window is open at
 * `t`; Infinity when the windows never close (`* 00:00-24:00`).
 *
 * @example
 * ```ts
 * closesAt([parseWindow("* 02:00-04:00 UTC")], Date.parse("2026-06-01T03:00:00Z"));
 * // Date.parse("2026-06-01T04:00:00Z")
 * ```
 */
export function closesAt(windows: readonly Window[], t: number): number | undefined {
  if (!inWindow(windows, t)) return undefined;
  const all = windows.flatMap((w) => openings(w, t, 8));
  let end = t;
  for (let grown = true; grown;) {
    grown = false;
    for (const o of all) {
      if (o.start <= end && o.end > end) {
        end = o.end;
        grown = true;
      }
    }
  }
  // Open past every day looked at: open on all seven days around the clock.
  return end - t >= 7 * DAY_MS ? Infinity : end;
}
