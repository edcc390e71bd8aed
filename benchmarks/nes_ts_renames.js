// The rename cases of `waferline eval-nes` for JavaScript and TypeScript, found by the TypeScript compiler's own
// language service (independently of the tree-sitter code under test, server/features/next_edit/lexical.py):
//
//     node benchmarks/nes_ts_renames.js FILE...   (NODE_PATH: a folder holding the npm package `typescript`)
//
// For each file, every parameter and every local of a function (a `let`/`const`/`var` declared in its body) whose
// name is a plain identifier is renamed at its declaration with `findRenameLocations`; printed, one JSON line a
// file: {file, skipped, comments_left, candidates: [{kind, name, start, locations}]} with the offsets (UTF-16, the file's own) of
// the declaration and of every other location, in order. A candidate is left out when the rename reaches another
// file, needs a prefix or suffix (`{name}` shorthand becomes `{name: new}`), lies in a string, or its declaration is
// not its first location (the user renames where the name is declared). Mentions in comments (JSDoc `@param name`)
// are not counted as edits, as the Python cases rename code only. benchmarks/nes_cases_ts.py makes the cases.
"use strict";

const fs = require("fs");
const path = require("path");
const ts = require("typescript");

const files = process.argv.slice(2).map((f) => path.resolve(f));
const texts = new Map(files.map((f) => [f, fs.readFileSync(f, "utf8")]));
const options = { allowJs: true, checkJs: false, noEmit: true, target: ts.ScriptTarget.ES2022, noResolve: true };
const host = {
  getScriptFileNames: () => files,
  getScriptVersion: () => "1",
  getScriptSnapshot: (f) => (texts.has(f) ? ts.ScriptSnapshot.fromString(texts.get(f)) : undefined),
  getCurrentDirectory: () => process.cwd(),
  getCompilationSettings: () => options,
  getDefaultLibFileName: (o) => ts.getDefaultLibFilePath(o),
  fileExists: (f) => texts.has(f),
  readFile: (f) => texts.get(f),
};
const service = ts.createLanguageService(host, ts.createDocumentRegistry());

const FUNCTIONS = new Set([
  ts.SyntaxKind.FunctionDeclaration, ts.SyntaxKind.FunctionExpression, ts.SyntaxKind.ArrowFunction,
  ts.SyntaxKind.MethodDeclaration, ts.SyntaxKind.Constructor, ts.SyntaxKind.GetAccessor, ts.SyntaxKind.SetAccessor,
]);

function codeIdentifiers(source) {
  // the start of every identifier of the code (forEachChild does not enter JSDoc comments)
  const out = new Set();
  (function visit(node) {
    if (node.kind === ts.SyntaxKind.Identifier) out.add(node.getStart(source));
    ts.forEachChild(node, visit);
  })(source);
  return out;
}

function declarations(source) {
  // [kind, identifier] of each parameter and each local of a function body
  const out = [];
  (function visit(node, inFunction) {
    if (FUNCTIONS.has(node.kind)) {
      for (const p of node.parameters) {
        const plain = ts.isIdentifier(p.name) && p.name.text !== "this" && !p.dotDotDotToken;
        if (plain && !(ts.getModifiers(p) || []).length) out.push(["parameter", p.name]);
      }
    } else if (inFunction && ts.isVariableDeclaration(node) && ts.isIdentifier(node.name)) {
      out.push(["local", node.name]);
    }
    ts.forEachChild(node, (child) => visit(child, inFunction || FUNCTIONS.has(node.kind)));
  })(source, false);
  return out;
}

for (const file of files) {
  const text = texts.get(file);
  const source = service.getProgram().getSourceFile(file);
  const line = { file, skipped: {}, comments_left: 0, candidates: [] };
  const skip = (why) => { line.skipped[why] = (line.skipped[why] || 0) + 1; };
  if (/[\uD800-\uDFFF]/.test(text)) {  // UTF-16 offsets would not be code points: not worth converting
    console.log(JSON.stringify({ ...line, skipped: { "astral characters": 1 } }));
    continue;
  }
  const code = codeIdentifiers(source);
  for (const [kind, id] of declarations(source)) {
    const start = id.getStart(source);
    const found = service.findRenameLocations(file, start, false, false, { providePrefixAndSuffixTextForRename: true });
    if (!found) { skip("not renameable"); continue; }
    if (found.some((l) => l.fileName !== file)) { skip("another file"); continue; }
    if (found.some((l) => l.prefixText || l.suffixText)) { skip("shorthand"); continue; }
    const spans = found.map((l) => l.textSpan.start).sort((a, b) => a - b);
    const inCode = spans.filter((s) => code.has(s));
    const comments = spans.filter((s) => !code.has(s));
    if (comments.some((s) => !inComment(text, s))) { skip("not an identifier"); continue; }
    if (inCode[0] !== start) { skip("a use before the declaration"); continue; }
    if (inCode.some((s) => text.slice(s, s + id.text.length) !== id.text)) { skip("text differs"); continue; }
    if (comments.length) line.comments_left += 1;
    line.candidates.push({ kind, name: id.text, start, locations: inCode.slice(1) });
  }
  console.log(JSON.stringify(line));
}

function inComment(text, at) {
  // whether offset `at` lies in a /* */ or // comment (a JSDoc tag's name): the line before it, read by hand
  const open = text.lastIndexOf("/*", at);
  if (open >= 0 && text.indexOf("*/", open) > at) return true;
  const lineStart = text.lastIndexOf("\n", at) + 1;
  return text.slice(lineStart, at).includes("//");
}
