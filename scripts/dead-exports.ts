/**
 * `npx tsx scripts/dead-exports.ts`: the exports of src/ (tests aside) that no other file of
 * src/ or scripts/ uses, by the TypeScript language service's references (a re-export or
 * an import alone is no use). Each line names the file, the symbol, its uses in its own
 * file and in tests: `same=0 tests=0` is dead code; `same=0 tests=N` a test seam or dead;
 * `same=N` an export nothing imports. Takes a minute or two; prints, changes nothing.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const config = ts.readConfigFile(path.join(root, 'tsconfig.json'), ts.sys.readFile);
const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
const service = ts.createLanguageService({
  getScriptFileNames: () => parsed.fileNames,
  getScriptVersion: () => '1',
  getScriptSnapshot: (file) => (ts.sys.fileExists(file) ? ts.ScriptSnapshot.fromString(ts.sys.readFile(file) ?? '') : undefined),
  getCurrentDirectory: () => root,
  getCompilationSettings: () => parsed.options,
  getDefaultLibFileName: (options) => ts.getDefaultLibFilePath(options),
  fileExists: ts.sys.fileExists,
  readFile: ts.sys.readFile,
  readDirectory: ts.sys.readDirectory,
  directoryExists: ts.sys.directoryExists,
  getDirectories: ts.sys.getDirectories,
});
const program = service.getProgram();
if (!program) throw new Error('no program');
const checker = program.getTypeChecker();
const isTest = (file: string) => /\.test\.tsx?$/.test(file) || file.startsWith(path.join(root, 'test') + path.sep);

/** The trimmed line around `offset` of `file`. */
function lineAt(file: string, offset: number): string {
  const text = ts.sys.readFile(file) ?? '';
  return text.slice(text.lastIndexOf('\n', offset) + 1, text.indexOf('\n', offset)).trim();
}
const reExportOrImport = /^(export\s*(type\s*)?\{|export \* from|import\s|\}\s*from)/;

for (const source of program.getSourceFiles()) {
  const file = source.fileName;
  if (!file.startsWith(path.join(root, 'src') + path.sep) || isTest(file)) continue;
  const module = checker.getSymbolAtLocation(source);
  if (!module) continue;
  for (const exported of checker.getExportsOfModule(module)) {
    const declaration = exported.declarations?.[0];
    if (!declaration || declaration.getSourceFile() !== source) continue; // a re-export is judged where it is declared
    const name = ts.getNameOfDeclaration(declaration) ?? declaration;
    const uses = { same: 0, other: 0, tests: 0 };
    for (const symbol of service.findReferences(file, name.getStart()) ?? []) {
      for (const reference of symbol.references) {
        if (reference.isDefinition || reExportOrImport.test(lineAt(reference.fileName, reference.textSpan.start))) continue;
        if (reference.fileName === file) uses.same++;
        else if (isTest(reference.fileName)) uses.tests++;
        else uses.other++;
      }
    }
    if (uses.other === 0) console.log(`${path.relative(root, file)}\t${exported.name}\tsame=${uses.same}\ttests=${uses.tests}`);
  }
}
