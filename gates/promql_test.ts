import assert from "node:assert/strict";
import { presenceQuery, selectors } from "./promql.ts";

Deno.test({
  name: "selectors() finds each vector selector of valid PromQL, and what is meant to be empty",
  permissions: "none",
  async fn(t) {
    const cases: [string, string, string[], string[]][] = [
      ["a bare metric", "up == 0", ["up"], []],
      [
        "inside an aggregation with by, a function and a range",
        'sum by (ns) (rate(errors_total{job="api"}[5m])) > 0',
        ['errors_total{job="api"}[5m]'],
        [],
      ],
      [
        "grouping labels and group_left's list are no metrics",
        "rate(foo[5m] offset 1h @ start())[30m:1m] > 2 and on(instance) group_left(node) bar",
        ["foo[5m] offset 1h @ start()", "bar"],
        [],
      ],
      [
        "a selector with no name, and a negative offset",
        '{__name__=~"foo.*", job="x"} offset -5m',
        ['{__name__=~"foo.*", job="x"} offset -5m'],
        [],
      ],
      [
        "strings and comments are skipped",
        'label_replace(up, "a", "$1", "b", "(.*)") unless count_values("v", build_info) > 1e3 # x_total',
        ["up", "build_info"],
        [],
      ],
      ["aggregation with the clause after", "topk(3, sum(x) by (a)) > bool 5", ["x"], []],
      [
        "absent() and ALERTS are meant to be empty",
        'absent(up{job="x"}) or ALERTS{alertname="X"} or y',
        ['up{job="x"}', 'ALERTS{alertname="X"}', "y"],
        ['up{job="x"}', 'ALERTS{alertname="X"}'],
      ],
      ["the same selector twice is one", "a > 0 or a < -1", ["a"], []],
      ["a number-only query has none", "vector(1) > 0", [], []],
      // Prometheus's grammar takes these words as metric names where no
      // aggregation follows (metric_identifier in generated_parser.y).
      ["an aggregation's name as a metric name", 'count > 0 or max{a="b"} or by', [
        "count",
        'max{a="b"}',
        "by",
      ], []],
      [
        "anchored and smoothed (Prometheus 3) belong to the selector before",
        "rate(x[5m] smoothed) > 0 or y anchored",
        ["x[5m] smoothed", "y anchored"],
        [],
      ],
      [
        "@ end() on a subquery is the evaluation time",
        "max_over_time(rate(x[5m])[10m:1m] @ end()) > 0",
        ["x[5m]"],
        [],
      ],
    ];
    for (const [what, q, want, exempt] of cases) {
      await t.step(what, () => {
        const got = selectors(q);
        assert.deepEqual(got.map((s) => s.text), want);
        assert.deepEqual(got.filter((s) => s.exempt).map((s) => s.text), exempt);
      });
    }
  },
});

Deno.test({
  name: "selectors() refuses what it cannot read instead of passing a selector by",
  permissions: "none",
  async fn(t) {
    const cases: [string, string, RegExp][] = [
      ["a duration expression", "foo offset (1h + 5m)", /offset that is no duration/],
      ["an unclosed bracket", "sum(foo", /unclosed \(/],
      ["an unterminated string", 'foo{a="b}', /unterminated string/],
      ["a character outside PromQL", "foo ? 1", /unexpected "\?"/],
      // The subquery's offset moves every selector inside it: x would be
      // checked now while the query reads it a day ago.
      [
        "an offset on a subquery over an expression",
        "max_over_time(rate(x[5m])[10m:1m] offset 1d) > 0",
        /offset or @ of a subquery over an expression/,
      ],
      [
        "an @ time on a subquery over an expression",
        "max_over_time(rate(x[5m])[10m:1m] @ 1700000000) > 0",
        /offset or @ of a subquery over an expression/,
      ],
    ];
    for (const [what, q, want] of cases) {
      await t.step(what, () => assert.throws(() => selectors(q), want));
    }
  },
});

Deno.test({
  name: "presenceQuery() asks for the data as the query reads it, range and modifiers included",
  permissions: "none",
  fn() {
    assert.equal(presenceQuery({ text: "up", range: false, exempt: false }), "count(up)");
    assert.equal(
      presenceQuery({
        text: "x[5m] offset 1h",
        instant: "x offset 1h",
        range: true,
        exempt: false,
      }),
      "count(x offset 1h)",
    );
  },
});

Deno.test({
  name:
    "presenceQuery() of a range selector honours staleness: a dead exporter's series is dark from the next failed scrape, not once the range has passed",
  permissions: "none",
  async fn(t) {
    // count_over_time(x[1d]) finds the samples of a target that died an
    // hour ago (staleness markers are no samples of a range): the gate would
    // trust `max_over_time(x[1d]) > 0` on a dead exporter for a day.
    const cases: [string, string][] = [
      ["max_over_time(x[1d]) > 0", "count(x)"],
      [
        'rate(errors_total{job="api"}[5m] offset 1h) > 0',
        'count(errors_total{job="api"} offset 1h)',
      ],
      ["max_over_time(x[30m:1m] @ end())", "count(x @ end())"],
      ["rate(x[5m] offset 1h anchored) > 0", "count(x offset 1h)"],
    ];
    for (const [q, want] of cases) {
      await t.step(q, () => assert.equal(presenceQuery(selectors(q)[0]), want));
    }
  },
});
