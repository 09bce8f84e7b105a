import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

/*
 * The import graph of src/ as the TypeScript compiler reads a file's imports (ts.preProcessFile):
 * value and type imports, re-exports and dynamic import() alike — a circle closed only by a type
 * import is still a circle for the next engineer who turns it into a value.
 */

export const SRC = resolve(import.meta.dirname, '..', '..', 'src');

/** Every .ts file under `root`, absolute. */
export function sourceFiles(root: string = SRC): string[] {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) files.push(path);
    }
  };
  walk(root);
  return files;
}

/** The relative imports of a file's text, resolved to .ts files that exist. */
export function importsOf(file: string, text: string = readFileSync(file, 'utf8')): string[] {
  const { importedFiles } = ts.preProcessFile(text, true, true);
  const out: string[] = [];
  for (const { fileName } of importedFiles) {
    if (!fileName.startsWith('.')) continue;
    const target = resolve(dirname(file), fileName.replace(/\.js$/, '.ts'));
    if (existsSync(target)) out.push(target);
  }
  return out;
}

/** File → the files it imports, for every file under `root` (paths relative to it). */
export function importGraph(root: string = SRC): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles(root))
    graph.set(
      relative(root, file),
      importsOf(file).map((t) => relative(root, t)),
    );
  return graph;
}

/** The module (first folder under src/) a file belongs to; a top-level file is its own. */
export function moduleOf(path: string): string {
  const slash = path.indexOf('/');
  return slash < 0 ? path : path.slice(0, slash);
}

/** The graph of modules: a module imports another when any of its files imports one of the other's. */
export function moduleGraph(files: Map<string, string[]>): Map<string, string[]> {
  const graph = new Map<string, Set<string>>();
  for (const [file, deps] of files) {
    const from = moduleOf(file);
    const set = graph.get(from) ?? new Set<string>();
    for (const d of deps) if (moduleOf(d) !== from) set.add(moduleOf(d));
    graph.set(from, set);
  }
  return new Map([...graph].map(([k, v]) => [k, [...v].sort()]));
}

/** The circles of a graph: its strongly connected components of more than one node, or a node importing itself (Tarjan). */
export function circles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}
