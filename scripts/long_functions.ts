/**
 * Lists the functions and methods longer than a limit in the given TypeScript
 * files, longest first, so a split can be measured before and after.
 *
 * Usage: `deno task long-functions [--max 50] FILE…` (e.g. main.ts and run/\*.ts)
 *
 * @module
 */
import ts from "typescript";

/** One function-like node and its length in lines. */
export interface FunctionLength {
  /** The file the function is in. */
  file: string;
  /** The function's name, `Class.method` for methods, `<anonymous>` otherwise. */
  name: string;
  /** The 1-based line the function starts on. */
  line: number;
  /** Lines from the first to the last line of the function, both included. */
  lines: number;
}

/**
 * Measures every function, method, constructor, accessor and arrow function in
 * one source text.
 *
 * @param file The file name, used for reporting only.
 * @param text The TypeScript source.
 * @returns One entry per function-like node, in source order.
 */
export function measureFunctions(file: string, text: string): FunctionLength[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: FunctionLength[] = [];
  const visit = (node: ts.Node, owner: string): void => {
    let nextOwner = owner;
    if (ts.isClassDeclaration(node) && node.name) nextOwner = node.name.text;
    if (ts.isFunctionLike(node) && "body" in node && node.body) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      found.push({
        file,
        name: functionName(node, owner),
        line: start + 1,
        lines: end - start + 1,
      });
    }
    ts.forEachChild(node, (child) => visit(child, nextOwner));
  };
  visit(source, "");
  return found;
}

function functionName(node: ts.Node, owner: string): string {
  const named = node as ts.Node & { name?: ts.Node };
  const id = named.name;
  let name = id && (ts.isIdentifier(id) || ts.isPrivateIdentifier(id)) ? id.text : "";
  if (ts.isConstructorDeclaration(node)) name = "constructor";
  if (!name && ts.isVariableDeclaration(node.parent) && ts.isIdentifier(node.parent.name)) {
    name = node.parent.name.text;
  }
  if (!name) return "<anonymous>";
  return ts.isClassElement(node) && owner ? `${owner}.${name}` : name;
}

if (import.meta.main) {
  const args = [...Deno.args];
  let max = 50;
  const at = args.indexOf("--max");
  if (at >= 0) {
    max = Number(args[at + 1]);
    args.splice(at, 2);
  }
  const long = args
    .flatMap((file) => measureFunctions(file, Deno.readTextFileSync(file)))
    .filter((f) => f.lines > max)
    .sort((a, b) => b.lines - a.lines);
  for (const f of long) {
    console.log(`${String(f.lines).padStart(5)}  ${f.file}:${f.line}  ${f.name}`);
  }
}
