/**
 * The vector selectors of a PromQL expression, read by a small scanner, not
 * a full parser: what the gate must find data for before it trusts an empty
 * answer (an empty vector is how a healthy alerting expression answers, and
 * also how a typo or a dead exporter answers).
 *
 * The expression has already been accepted by Prometheus (the gate asks it
 * first), so the scanner only needs to tell selectors from everything else
 * in valid PromQL: function and aggregation names (an identifier before
 * `(`, or an aggregation before `by`/`without`), the label lists of
 * `by`/`without`/`on`/`ignoring`/`group_left`/`group_right`, keywords and
 * binary operators, numbers and durations, strings, comments, the ranges and
 * subqueries in `[...]`, and the `offset`/`@` modifiers, which belong to the
 * selector they follow (the data the query reads is there, not now).
 *
 * What it cannot read it refuses with a {@linkcode SyntaxError} rather than
 * passing a selector by: characters outside PromQL, an `offset` or `@` not
 * followed by a duration, a number or `start()`/`end()` (Prometheus 3's
 * experimental duration expressions such as `offset (1h + 5m)`), an
 * `offset` or `@ <time>` of a subquery over an expression (it moves the
 * selectors inside), and unbalanced brackets.
 *
 * Not checked (their emptiness is meant): selectors inside `absent()` and
 * `absent_over_time()`, which answer exactly when there is no data, and
 * selectors of Prometheus's own `ALERTS` and `ALERTS_FOR_STATE` series, which
 * are empty while nothing fires.
 *
 * @module
 */

/** One vector selector of a query. */
export interface Selector {
  /** The selector as written, with its range and modifiers: `rate(x[5m] offset 1h)` gives `x[5m] offset 1h`. */
  text: string;
  /** Whether it has a range (`[5m]`) or a subquery (`[5m:1m]`). */
  range: boolean;
  /**
   * The instant selector its data is asked by: the text without its range,
   * modifiers kept (`x offset 1h` for `x[5m] offset 1h`); the text itself
   * when it has no range.
   */
  instant?: string;
  /** Whether its emptiness is meant (inside `absent()`, or `ALERTS`): not checked. */
  exempt: boolean;
}

interface Token {
  kind: "ident" | "number" | "string" | "punct";
  text: string;
  start: number;
  end: number;
}

const AGGREGATIONS = new Set([
  "sum",
  "min",
  "max",
  "avg",
  "group",
  "stddev",
  "stdvar",
  "count",
  "count_values",
  "bottomk",
  "topk",
  "quantile",
  "limitk",
  "limit_ratio",
]);
/** Keywords followed by a parenthesised label list (or, for group_*, possibly none). */
const LABEL_LISTS = new Set(["by", "without", "on", "ignoring", "group_left", "group_right"]);
const OPERATOR_WORDS = new Set(["and", "or", "unless", "bool", "atan2"]);
const NUMBER_WORDS = new Set(["inf", "nan"]);
/** Functions whose argument is meant to be empty. */
const ABSENT = new Set(["absent", "absent_over_time"]);
/** Series that are empty while all is well. */
const EXEMPT_METRICS = new Set(["ALERTS", "ALERTS_FOR_STATE"]);

const NUMBER =
  /^(?:0[xX][0-9a-fA-F]+|(?:[0-9][0-9_]*(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?(?:(?:ms|[smhdwy])(?:[0-9]+(?:ms|[smhdwy]))*)?)/;
const IDENT = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const PUNCT = /^(?:==|!=|>=|<=|=~|!~|[{}()[\],@=<>+\-*/%^:])/;

/** The tokens of `q`; whitespace and comments dropped. */
function tokenize(q: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < q.length) {
    const c = q[i];
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    if (c === "#") {
      while (i < q.length && q[i] !== "\n") i++;
      continue;
    }
    const start = i;
    if (c === '"' || c === "'" || c === "`") {
      i++;
      while (i < q.length && q[i] !== c) i += q[i] === "\\" && c !== "`" ? 2 : 1;
      if (i >= q.length) throw new SyntaxError(`an unterminated string at column ${start + 1}`);
      out.push({ kind: "string", text: q.slice(start, ++i), start, end: i });
      continue;
    }
    const m = NUMBER.exec(q.slice(i)) ?? IDENT.exec(q.slice(i)) ?? PUNCT.exec(q.slice(i));
    if (!m) throw new SyntaxError(`an unexpected ${JSON.stringify(c)} at column ${i + 1}`);
    const kind = /^[0-9.]/.test(m[0]) ? "number" : IDENT.test(m[0]) ? "ident" : "punct";
    out.push({ kind, text: m[0], start, end: i += m[0].length });
  }
  return out;
}

/** The index after the bracket that closes the one at `open`. */
function closing(t: Token[], open: number): number {
  const pairs: Record<string, string> = { "(": ")", "[": "]", "{": "}" };
  const stack: string[] = [];
  for (let i = open; i < t.length; i++) {
    const x = t[i].text;
    if (t[i].kind !== "punct") continue;
    if (pairs[x]) stack.push(pairs[x]);
    else if (x === ")" || x === "]" || x === "}") {
      if (stack.pop() !== x) {
        throw new SyntaxError(`an unbalanced ${x} at column ${t[i].start + 1}`);
      }
      if (!stack.length) return i + 1;
    }
  }
  throw new SyntaxError(`an unclosed ${t[open].text} at column ${t[open].start + 1}`);
}

/**
 * Whether the aggregation's name at `i` aggregates: its arguments or its
 * `by`/`without` follow. Else it is a metric's name, as Prometheus's
 * grammar has it (`count > 0`).
 */
function aggregates(t: Token[], i: number): boolean {
  const n = t[i + 1];
  return n?.text === "(" || (n?.kind === "ident" && /^(by|without)$/i.test(n.text));
}

/** Whether `by`/`without` at `i` is a metric's name: no label list follows (`by > 0`). */
function metricNamed(t: Token[], i: number, word: string): boolean {
  return (word === "by" || word === "without") && t[i + 1]?.text !== "(";
}

/** Prometheus 3's modifiers of how a selector reads its samples, not where. */
const READ_MODIFIERS = /^(anchored|smoothed)$/i;

/** The index after the `offset`/`@`/`anchored`/`smoothed` modifiers from `i` on. */
function modifiers(t: Token[], i: number): number {
  for (;;) {
    const w = t[i]?.text;
    if (t[i]?.kind === "ident" && READ_MODIFIERS.test(w)) i++;
    else if (t[i]?.kind === "ident" && w.toLowerCase() === "offset") {
      let j = i + 1;
      if (t[j]?.text === "-") j++;
      if (t[j]?.kind !== "number") {
        throw new SyntaxError(`an offset that is no duration at column ${t[i].start + 1}`);
      }
      i = j + 1;
    } else if (w === "@") {
      let j = i + 1;
      if (t[j]?.text === "-" || t[j]?.text === "+") j++;
      if (t[j]?.kind === "number") i = j + 1;
      else if (/^(start|end)$/.test(t[j]?.text ?? "") && t[j + 1]?.text === "(") {
        i = closing(t, j + 1);
      } else throw new SyntaxError(`an @ that is no time at column ${t[i].start + 1}`);
    } else return i;
  }
}

/**
 * The vector selectors of `query`, in order, each once.
 *
 * @throws {SyntaxError} where the scanner cannot tell (see the module's notes)
 * @example
 * ```ts
 * selectors('sum by (ns) (rate(errors_total{job="api"}[5m])) > 0').map((s) => s.text);
 * // ['errors_total{job="api"}[5m]']
 * ```
 */
export function selectors(query: string): Selector[] {
  const t = tokenize(query);
  for (let i = 0; i < t.length; i = t[i].text.match(/^[([{]$/) ? closing(t, i) : i + 1) {
    if (/^[)\]}]$/.test(t[i].text)) {
      throw new SyntaxError(`an unbalanced ${t[i].text} at column ${t[i].start + 1}`);
    }
  }
  const found = new Map<string, Selector>();
  // Where an absent() call's argument ends, innermost last.
  const absentEnds: number[] = [];
  let i = 0;
  while (i < t.length) {
    while (absentEnds.length && i >= absentEnds.at(-1)!) absentEnds.pop();
    const tok = t[i];
    const word = tok.kind === "ident" ? tok.text.toLowerCase() : "";
    if (word === "offset" || tok.text === "@") {
      i = subqueryModifiers(t, i);
    } else if (tok.kind === "ident" && LABEL_LISTS.has(word) && !metricNamed(t, i, word)) {
      i = t[i + 1]?.text === "(" ? closing(t, i + 1) : i + 1;
    } else if (tok.kind === "ident" && AGGREGATIONS.has(word) && aggregates(t, i)) {
      i++; // its label list or its arguments follow
    } else if (tok.kind === "ident" && (OPERATOR_WORDS.has(word) || NUMBER_WORDS.has(word))) {
      i++;
    } else if (tok.kind === "ident" && t[i + 1]?.text === "(") {
      if (ABSENT.has(tok.text)) absentEnds.push(closing(t, i + 1));
      i += 2;
    } else if (tok.kind === "ident" || tok.text === "{") {
      i = selectorAt(t, i, query, absentEnds.length > 0, found);
    } else if (tok.text === "[") {
      i = subqueryModifiers(t, closing(t, i)); // a subquery over an expression
    } else i++;
  }
  return [...found.values()];
}

/**
 * The index after the modifiers of a subquery over an expression, from `i`
 * on. Such an `offset` or `@ <time>` moves every selector inside it (their
 * presence would be asked now while the query reads another time), so it
 * is refused; `@ start()` and `@ end()` are the evaluation time of an
 * instant query.
 */
function subqueryModifiers(t: Token[], i: number): number {
  const end = modifiers(t, i);
  for (let j = i; j < end; j++) {
    const now = t[j].text === "@" && /^(start|end)$/.test(t[j + 1]?.text ?? "");
    if (now) j += 3; // @ start ( )
    else {
      throw new SyntaxError(
        `an offset or @ of a subquery over an expression at column ${t[j].start + 1}`,
      );
    }
  }
  return end;
}

/** Reads the selector at `i` into `found`; the index after it. */
function selectorAt(
  t: Token[],
  i: number,
  query: string,
  inAbsent: boolean,
  found: Map<string, Selector>,
): number {
  const start = t[i].start;
  const name = t[i].kind === "ident" ? t[i].text : undefined;
  let j = name === undefined ? i : i + 1;
  if (t[j]?.text === "{") j = closing(t, j);
  const base = query.slice(start, t[j - 1].end);
  let range = false;
  let mods = j;
  if (t[j]?.text === "[") {
    range = true;
    mods = j = closing(t, j);
  }
  j = modifiers(t, j);
  const text = query.slice(start, t[j - 1].end);
  // Where it reads, without how (anchored, smoothed) or over what range.
  const where = t.slice(mods, j).filter((x) =>
    !(x.kind === "ident" && READ_MODIFIERS.test(x.text))
  );
  const instant = [base, ...where.map((x) => x.text)].join(" ").replace(/ \( \)/g, "()");
  const exempt = inAbsent || (name !== undefined && EXEMPT_METRICS.has(name));
  const had = found.get(text);
  found.set(text, { text, range, instant, exempt: exempt && (had?.exempt ?? true) });
  return j;
}

/**
 * An instant query that returns one sample while `s` matches data where the
 * query reads it (its offset and `@` included), and nothing otherwise. A
 * range is asked as the instant selector at its end, not as any sample
 * within it: staleness markers are no samples of a range, so
 * `count_over_time(x[1d])` still finds a target that died an hour ago, and
 * the gate would trust `max_over_time(x[1d]) > 0` on a dead exporter for a
 * day. The instant selector honours staleness (dark from the next failed
 * scrape) and Prometheus's look-back (5 m by default) otherwise.
 *
 * @example
 * ```ts
 * presenceQuery({ text: "up[5m] offset 1h", instant: "up offset 1h", range: true, exempt: false });
 * // "count(up offset 1h)"
 * ```
 */
export function presenceQuery(s: Selector): string {
  return `count(${s.instant ?? s.text})`;
}
