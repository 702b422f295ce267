import assert from "node:assert/strict";
import {
  closesAt,
  describeNextOpening,
  instantOf,
  inWindow,
  nextOpening,
  parseWindow,
} from "./window.ts";
import { UsageError } from "../job.ts";

const at = (iso: string) => Date.parse(iso);
const iso = (t: number | undefined) =>
  t === undefined ? undefined : Number.isFinite(t) ? new Date(t).toISOString() : String(t);

Deno.test({
  name: "parseWindow() reads days, a time span and a zone",
  permissions: "none",
  async fn(t) {
    const cases: [string, { days: number[]; startMin: number; endMin: number; zone: string }][] = [
      ["Mon-Fri 02:00-04:00 Europe/Berlin", {
        days: [1, 2, 3, 4, 5],
        startMin: 120,
        endMin: 240,
        zone: "Europe/Berlin",
      }],
      ["Sat,Sun 22:00-02:00", { days: [0, 6], startMin: 1320, endMin: 120, zone: "UTC" }],
      ["Fri-Mon 10:00-11:00 UTC", { days: [0, 1, 5, 6], startMin: 600, endMin: 660, zone: "UTC" }],
      ["* 00:00-24:00 America/New_York", {
        days: [0, 1, 2, 3, 4, 5, 6],
        startMin: 0,
        endMin: 1440,
        zone: "America/New_York",
      }],
      ["  mon,WED-thu   01:30-01:45 ", { days: [1, 3, 4], startMin: 90, endMin: 105, zone: "UTC" }],
    ];
    for (const [spec, want] of cases) {
      await t.step(spec, () => {
        const w = parseWindow(spec);
        assert.deepEqual(
          { days: [...w.days].sort(), startMin: w.startMin, endMin: w.endMin, zone: w.zone },
          want,
        );
      });
    }
  },
});

Deno.test({
  name: "parseWindow() refuses a bad spec with a UsageError naming it and the fix",
  permissions: "none",
  async fn(t) {
    const cases: [string, RegExp][] = [
      ["", /expected DAYS HH:MM-HH:MM \[ZONE\]/],
      ["Mon-Fri", /expected DAYS HH:MM-HH:MM \[ZONE\], e.g. Mon-Fri 02:00-04:00 Europe\/Berlin/],
      ["Mon-Fry 02:00-04:00", /unknown day "Fry"; use Mon, Tue/],
      ["Mon-Tue-Wed 02:00-04:00", /day range "Mon-Tue-Wed" has two dashes/],
      ["Mon 2:00-04:00", /bad time "2:00"; use HH:MM from 00:00 to 23:59$/],
      ["Mon 02:00-25:00", /bad time "25:00"; use HH:MM from 00:00 to 23:59 \(or 24:00\)/],
      ["Mon 24:00-02:00", /bad time "24:00"/],
      ["Mon 02:60-03:00", /bad time "02:60"/],
      ["Mon 02:00 04:00", /bad time span "02:00"/],
      ["Mon 02:00-03:00-04:00", /bad time span/],
      ["Mon 02:00-02:00", /opens and closes at the same time; for a whole day use 00:00-24:00/],
      ["Mon 02:00-04:00 Europe/Berlinn", /unknown time zone "Europe\/Berlinn"; give an IANA zone/],
      ["Mon 02:00-04:00 UTC extra", /expected DAYS/],
    ];
    for (const [spec, want] of cases) {
      await t.step(spec || "(empty)", () => {
        assert.throws(() => parseWindow(spec), (e: Error) => {
          assert.ok(e instanceof UsageError);
          assert.match(e.message, new RegExp(`^Invalid --window ${JSON.stringify(spec)}: `));
          assert.match(e.message, want);
          return true;
        });
      });
    }
  },
});

Deno.test({
  name: "instantOf() resolves a skipped wall time to the transition, a repeated one to the first",
  permissions: "none",
  async fn(t) {
    const cases: [string, string, string][] = [
      ["2026-06-01T02:00:00Z", "Europe/Berlin", "2026-06-01T00:00:00.000Z"],
      ["2026-01-15T02:00:00Z", "Europe/Berlin", "2026-01-15T01:00:00.000Z"],
      // 02:30 does not exist on 2026-03-29 in Berlin: the clocks first read past it at 03:00 CEST.
      ["2026-03-29T02:30:00Z", "Europe/Berlin", "2026-03-29T01:00:00.000Z"],
      // 02:30 happens twice on 2026-10-25 in Berlin: the first (CEST).
      ["2026-10-25T02:30:00Z", "Europe/Berlin", "2026-10-25T00:30:00.000Z"],
      ["2026-03-08T02:30:00Z", "America/New_York", "2026-03-08T07:00:00.000Z"], // 03:00 EDT
      ["2026-11-01T01:30:00Z", "America/New_York", "2026-11-01T05:30:00.000Z"],
      ["2026-06-01T12:00:00Z", "UTC", "2026-06-01T12:00:00.000Z"],
    ];
    for (const [wall, zone, want] of cases) {
      await t.step(`${wall.slice(0, 16)} in ${zone}`, () => {
        assert.equal(iso(instantOf(at(wall), zone)), want);
      });
    }
  },
});

Deno.test({
  name: "a window whose start falls in the spring-forward gap opens at the transition",
  permissions: "none",
  async fn(t) {
    // [name, window, now, next opening, closes at (from the opening)]
    const cases: [string, string, string, string, string][] = [
      // Berlin 2026-03-29: 02:00 CET jumps to 03:00 CEST (01:00Z); 02:30 never happens.
      [
        "start in the gap",
        "* 02:30-03:30 Europe/Berlin",
        "2026-03-28T23:00:00Z",
        "2026-03-29T01:00:00.000Z",
        "2026-03-29T01:30:00.000Z",
      ],
      [
        "start in the gap, longer window",
        "* 02:30-04:00 Europe/Berlin",
        "2026-03-28T23:00:00Z",
        "2026-03-29T01:00:00.000Z",
        "2026-03-29T02:00:00.000Z",
      ],
      [
        "start and end in the gap: nothing local exists",
        "* 02:10-02:50 Europe/Berlin",
        "2026-03-28T23:00:00Z",
        "2026-03-30T00:10:00.000Z",
        "2026-03-30T00:50:00.000Z",
      ],
      // The end in the gap: the clocks read past 02:30 from 03:00 CEST on.
      [
        "end in the gap",
        "* 01:00-02:30 Europe/Berlin",
        "2026-03-28T23:30:00Z",
        "2026-03-29T00:00:00.000Z",
        "2026-03-29T01:00:00.000Z",
      ],
      // New York 2026-03-08: 02:00 EST jumps to 03:00 EDT (07:00Z).
      [
        "start in the gap, New York",
        "* 02:30-03:30 America/New_York",
        "2026-03-08T05:00:00Z",
        "2026-03-08T07:00:00.000Z",
        "2026-03-08T07:30:00.000Z",
      ],
      // Berlin 2026-10-25: 03:00 CEST goes back to 02:00 CET; 02:30 happens twice, the first opens.
      [
        "start in the fall-back overlap",
        "* 02:30-03:30 Europe/Berlin",
        "2026-10-24T22:00:00Z",
        "2026-10-25T00:30:00.000Z",
        "2026-10-25T02:30:00.000Z",
      ],
      [
        "end in the fall-back overlap",
        "* 01:00-02:30 Europe/Berlin",
        "2026-10-24T22:00:00Z",
        "2026-10-24T23:00:00.000Z",
        "2026-10-25T00:30:00.000Z",
      ],
    ];
    for (const [name, spec, now, opens, closes] of cases) {
      await t.step(`${name}: ${spec} from ${now}`, () => {
        const windows = [parseWindow(spec)];
        const next = nextOpening(windows, at(now));
        assert.equal(iso(next), opens);
        assert.equal(iso(closesAt(windows, next!)), closes);
        assert.equal(inWindow(windows, next! - 1), false);
      });
    }
  },
});

Deno.test({
  name: "inWindow() keeps local hours across DST changes, midnight and wrapping day ranges",
  permissions: "none",
  async fn(t) {
    const cases: [string[], string, boolean][] = [
      // Berlin, spring forward 2026-03-29: 02:00 does not exist, the window opens at 03:00 CEST.
      [["* 02:00-04:00 Europe/Berlin"], "2026-03-28T01:00:00Z", true], // 02:00 CET
      [["* 02:00-04:00 Europe/Berlin"], "2026-03-28T02:59:59Z", true],
      [["* 02:00-04:00 Europe/Berlin"], "2026-03-28T03:00:00Z", false], // 04:00 CET
      [["* 02:00-04:00 Europe/Berlin"], "2026-03-29T00:30:00Z", false], // 01:30 CET
      [["* 02:00-04:00 Europe/Berlin"], "2026-03-29T01:00:00Z", true], // 03:00 CEST
      [["* 02:00-04:00 Europe/Berlin"], "2026-03-29T02:00:00Z", false], // 04:00 CEST
      [["* 02:00-04:00 Europe/Berlin"], "2026-03-30T00:00:00Z", true], // 02:00 CEST
      // Berlin, fall back 2026-10-25: opens at the first 02:00 (CEST), closes at 04:00 CET.
      [["* 02:00-04:00 Europe/Berlin"], "2026-10-24T23:59:00Z", false], // 01:59 CEST
      [["* 02:00-04:00 Europe/Berlin"], "2026-10-25T00:00:00Z", true], // 02:00 CEST
      [["* 02:00-04:00 Europe/Berlin"], "2026-10-25T02:59:00Z", true], // 03:59 CET
      [["* 02:00-04:00 Europe/Berlin"], "2026-10-25T03:00:00Z", false], // 04:00 CET
      // New York, spring forward 2026-03-08 inside an overnight window.
      [["Sat 22:00-06:00 America/New_York"], "2026-03-08T02:59:00Z", false], // Sat 21:59 EST
      [["Sat 22:00-06:00 America/New_York"], "2026-03-08T03:00:00Z", true], // Sat 22:00 EST
      [["Sat 22:00-06:00 America/New_York"], "2026-03-08T09:59:00Z", true], // Sun 05:59 EDT
      [["Sat 22:00-06:00 America/New_York"], "2026-03-08T10:00:00Z", false], // Sun 06:00 EDT
      // New York, fall back 2026-11-01.
      [["Sun 00:00-03:00 America/New_York"], "2026-11-01T04:00:00Z", true], // 00:00 EDT
      [["Sun 00:00-03:00 America/New_York"], "2026-11-01T07:59:00Z", true], // 02:59 EST
      [["Sun 00:00-03:00 America/New_York"], "2026-11-01T08:00:00Z", false], // 03:00 EST
      // Midnight crossing belongs to the start day: Fri 22:00 to Sat 02:00.
      [["Fri 22:00-02:00"], "2026-06-05T21:59:00Z", false], // Fri
      [["Fri 22:00-02:00"], "2026-06-05T22:00:00Z", true],
      [["Fri 22:00-02:00"], "2026-06-06T01:59:00Z", true], // Sat
      [["Fri 22:00-02:00"], "2026-06-06T22:30:00Z", false], // Sat evening: not a start day
      [["Fri 22:00-02:00"], "2026-06-05T01:00:00Z", false], // Fri early: Thu did not open
      // A day range wrapping past Sunday.
      [["Fri-Mon 10:00-11:00"], "2026-06-07T10:30:00Z", true], // Sun
      [["Fri-Mon 10:00-11:00"], "2026-06-08T10:30:00Z", true], // Mon
      [["Fri-Mon 10:00-11:00"], "2026-06-09T10:30:00Z", false], // Tue
      [["Fri-Mon 10:00-11:00"], "2026-06-04T10:30:00Z", false], // Thu
      // Several windows: any open one counts; none is never open.
      [["Mon 01:00-02:00", "Tue 03:00-04:00"], "2026-06-09T03:30:00Z", true],
      [[], "2026-06-09T03:30:00Z", false],
    ];
    for (const [specs, when, want] of cases) {
      await t.step(`${specs.join(" + ") || "(none)"} at ${when} → ${want}`, () => {
        assert.equal(inWindow(specs.map(parseWindow), at(when)), want);
      });
    }
  },
});

Deno.test({
  name: "nextOpening() and closesAt() find the next opening and the end of the open span",
  permissions: "none",
  async fn(t) {
    const cases: [string, string[], string, string | undefined, string | undefined][] = [
      // [name, windows, now, next opening, closes at]
      [
        "open now: opens now",
        ["* 02:00-04:00"],
        "2026-06-01T03:00:00Z",
        "2026-06-01T03:00:00.000Z",
        "2026-06-01T04:00:00.000Z",
      ],
      [
        "closed: later today",
        ["* 02:00-04:00"],
        "2026-06-01T01:00:00Z",
        "2026-06-01T02:00:00.000Z",
        undefined,
      ],
      [
        "at the closing instant it is closed",
        ["* 02:00-04:00"],
        "2026-06-01T04:00:00Z",
        "2026-06-02T02:00:00.000Z",
        undefined,
      ],
      [
        "a week ahead",
        ["Mon 02:00-04:00"],
        "2026-06-01T05:00:00Z",
        "2026-06-08T02:00:00.000Z",
        undefined,
      ],
      [
        "into the spring-forward night",
        ["Sun 02:00-04:00 Europe/Berlin"],
        "2026-03-28T05:00:00Z",
        "2026-03-29T01:00:00.000Z",
        undefined,
      ],
      [
        "closes in the fall-back night",
        ["* 02:00-04:00 Europe/Berlin"],
        "2026-10-25T00:30:00Z",
        "2026-10-25T00:30:00.000Z",
        "2026-10-25T03:00:00.000Z",
      ],
      [
        "weekend to Monday in New York after spring forward",
        ["Mon-Fri 09:00-17:00 America/New_York"],
        "2026-03-06T22:00:00Z",
        "2026-03-09T13:00:00.000Z",
        undefined,
      ],
      [
        "overnight across spring forward",
        ["Sat 22:00-06:00 America/New_York"],
        "2026-03-08T04:00:00Z",
        "2026-03-08T04:00:00.000Z",
        "2026-03-08T10:00:00.000Z",
      ],
      [
        "adjoining windows close together",
        ["Mon 22:00-24:00", "Tue 00:00-02:00"],
        "2026-06-08T23:00:00Z",
        "2026-06-08T23:00:00.000Z",
        "2026-06-09T02:00:00.000Z",
      ],
      [
        "overlapping windows in two zones",
        ["* 01:00-03:00 UTC", "* 04:00-06:00 Europe/Berlin"],
        "2026-06-01T01:30:00Z",
        "2026-06-01T01:30:00.000Z",
        "2026-06-01T04:00:00.000Z",
      ],
      [
        "always open never closes",
        ["* 00:00-24:00 Europe/Berlin"],
        "2026-03-29T01:30:00Z",
        "2026-03-29T01:30:00.000Z",
        "Infinity",
      ],
      ["no windows", [], "2026-06-01T03:00:00Z", undefined, undefined],
    ];
    for (const [name, specs, now, next, closes] of cases) {
      await t.step(name, () => {
        const windows = specs.map(parseWindow);
        assert.equal(iso(nextOpening(windows, at(now))), next);
        assert.equal(iso(closesAt(windows, at(now))), closes);
      });
    }
  },
});

Deno.test({
  name: "describeNextOpening() says the opening in the window's own zone, in UTC, and from now",
  permissions: "none",
  async fn(t) {
    const cases: [string, string[], string, string | undefined][] = [
      // [name, windows, now, said]
      [
        "Berlin in summer, days ahead",
        ["Mon 02:00-04:00 Europe/Berlin"],
        "2026-06-01T05:00:00Z",
        "Mon 02:00 Europe/Berlin (00:00Z), in 6d19h",
      ],
      [
        "Berlin in winter, the UTC day differs",
        ["Mon 00:30-04:00 Europe/Berlin"],
        "2026-11-29T22:00:00Z",
        "Mon 00:30 Europe/Berlin (Sun 23:30Z), in 1h30m",
      ],
      ["UTC says no UTC twice", ["* 02:00-04:00"], "2026-06-01T01:15:30Z", "Mon 02:00 UTC, in 45m"],
      [
        "the window that opens first names the zone",
        ["Tue 09:00-10:00 America/New_York", "Tue 06:00-07:00 Asia/Tokyo"],
        "2026-06-01T12:00:00Z",
        "Tue 06:00 Asia/Tokyo (Mon 21:00Z), in 9h00m",
      ],
      ["no windows", [], "2026-06-01T03:00:00Z", undefined],
    ];
    for (const [name, specs, now, want] of cases) {
      await t.step(name, () => {
        assert.equal(describeNextOpening(specs.map(parseWindow), at(now)), want);
      });
    }
  },
});
