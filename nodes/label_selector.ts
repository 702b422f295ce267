/**
 * Label selectors in kubectl's syntax (`app=web,tier!=cache`, `env in (a,b)`,
 * `!canary`, `gpu`, `rank>2`), parsed and matched without the API server, as
 * k8s.io/apimachinery/pkg/labels does. The node selectors go to the API server
 * as text; pod selectors (`--pod-selector`, `--blocking-pod-selector`) must be
 * refused before anything is cordoned, and are matched against pods the run
 * already holds.
 *
 * @module
 */

import { isLabelKey, isLabelValue } from "../job.ts";

/** The operators of a requirement, as apimachinery's `selection.Operator`. */
export type SelectorOperator =
  | "="
  | "=="
  | "!="
  | "in"
  | "notin"
  | "exists"
  | "!"
  | ">"
  | "<";

/** One comma-separated term of a selector; all terms must hold. */
export interface Requirement {
  /** The label key. */
  key: string;
  /** How the label is compared. */
  operator: SelectorOperator;
  /** The values compared against; empty for `exists` and `!`. */
  values: string[];
}

const BINARY = ["!=", "=", "==", ">", "<", "in", "notin"];
const SYMBOLS = new Set(["=", "!", "(", ")", ",", ">", "<"]);
const SYMBOL_TOKENS = new Set(["!", "!=", "=", "==", ">", "<", "(", ")", ","]);

type Token = { kind: "id" | "op" | "end"; text: string };

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const ch = text[i];
    if (/\s/.test(ch)) {
      i++;
    } else if (SYMBOLS.has(ch)) {
      // Longest symbol that is a token, as the lexer's scanSpecialSymbol.
      let j = i + 1;
      while (j < text.length && SYMBOLS.has(text[j]) && SYMBOL_TOKENS.has(text.slice(i, j + 1))) {
        j++;
      }
      tokens.push({ kind: "op", text: text.slice(i, j) });
      i = j;
    } else {
      let j = i;
      while (j < text.length && !SYMBOLS.has(text[j]) && !/\s/.test(text[j])) j++;
      tokens.push({ kind: "id", text: text.slice(i, j) });
      i = j;
    }
  }
  tokens.push({ kind: "end", text: "end of string" });
  return tokens;
}

/**
 * Parses a label selector as `kubectl get -l` does; the empty selector
 * selects everything.
 *
 * @throws {SyntaxError} with apimachinery's wording of what was found and expected
 * @example
 * ```ts
 * parseLabelSelector("app=web,env in (a,b)").length; // 2
 * ```
 */
export function parseLabelSelector(text: string): Requirement[] {
  const tokens = tokenize(text);
  let at = 0;
  const next = () => tokens[at++];
  const peek = () => tokens[at];
  const fail = (found: string, expected: string): never => {
    throw new SyntaxError(`found '${found}', expected: ${expected}`);
  };
  const requirements: Requirement[] = [];
  while (peek().kind !== "end") {
    let t = next();
    let negated = false;
    if (t.kind === "op" && t.text === "!") {
      negated = true;
      t = next();
    }
    if (t.kind !== "id") fail(t.text, "identifier");
    const key = t.text;
    if (!isLabelKey(key)) {
      throw new SyntaxError(
        `invalid label key ${
          JSON.stringify(key)
        }: a label key is an optional DNS prefix and "/", ` +
          "then at most 63 letters, digits, '-', '_' or '.'",
      );
    }
    let req: Requirement;
    if (peek().kind === "end" || peek().text === ",") {
      req = { key, operator: negated ? "!" : "exists", values: [] };
    } else if (negated) {
      return fail(peek().text, "',' or 'end of string'");
    } else {
      const op = next();
      if (!BINARY.includes(op.text)) fail(op.text, BINARY.join(", "));
      const values = op.text === "in" || op.text === "notin" ? setValues() : exactValue();
      req = { key, operator: op.text as SelectorOperator, values };
    }
    for (const v of req.values) {
      if (!isLabelValue(v)) {
        throw new SyntaxError(
          `invalid label value ${JSON.stringify(v)} of ${key}: at most 63 letters, digits, ` +
            "'-', '_' or '.', starting and ending with a letter or digit",
        );
      }
      if ((req.operator === ">" || req.operator === "<") && !/^[-+]?\d+$/.test(v)) {
        throw new SyntaxError(
          `invalid value ${JSON.stringify(v)} of ${key}: '>' and '<' need an integer`,
        );
      }
    }
    requirements.push(req);
    const sep = next();
    if (sep.kind === "end") break;
    if (sep.text !== ",") fail(sep.text, "',' or 'end of string'");
    if (peek().kind === "end") fail("end of string", "identifier after ','");
  }
  return requirements;

  function exactValue(): string[] {
    const t = peek();
    if (t.kind === "end" || t.text === ",") return [""];
    next();
    return t.kind === "id" ? [t.text] : fail(t.text, "identifier");
  }

  function setValues(): string[] {
    const open = next();
    if (open.text !== "(") fail(open.text, "'('");
    const values = new Set<string>();
    let expectValue = true;
    while (true) {
      const t = next();
      if (t.kind === "id" && expectValue) {
        values.add(t.text);
        expectValue = false;
      } else if (t.text === ",") {
        if (expectValue) values.add("");
        expectValue = true;
      } else if (t.text === ")") {
        if (expectValue) values.add("");
        return [...values].sort();
      } else {
        return fail(t.text, expectValue ? "',', ')' or identifier" : "',' or ')'");
      }
    }
  }
}

/**
 * Whether `labels` satisfy every requirement, with apimachinery's meaning:
 * `!=` and `notin` also match a missing label; `>` and `<` need an integer
 * label value.
 *
 * @example
 * ```ts
 * matchesLabels(parseLabelSelector("tier!=cache"), { app: "web" }); // true
 * ```
 */
export function matchesLabels(
  requirements: readonly Requirement[],
  labels: Readonly<Record<string, string>> = {},
): boolean {
  return requirements.every(({ key, operator, values }) => {
    const has = Object.hasOwn(labels, key);
    const value = labels[key];
    switch (operator) {
      case "=":
      case "==":
      case "in":
        return has && values.includes(value);
      case "!=":
      case "notin":
        return !has || !values.includes(value);
      case "exists":
        return has;
      case "!":
        return !has;
      case ">":
      case "<": {
        if (!has || !/^[-+]?\d+$/.test(value)) return false;
        const [a, b] = [BigInt(value), BigInt(values[0])];
        return operator === ">" ? a > b : a < b;
      }
    }
  });
}
