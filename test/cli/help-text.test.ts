import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { registrationsFor } from '../../src/cli/commands.js';
import { buildProgram } from '../../src/cli/program.js';

/*
 * The help of every command, as a person reads it in an 80-column terminal: no line runs past
 * 80, and no line ends in the middle of a sentence where the next word would have fitted (what a
 * literal newline in a description does once commander wraps the text around it).
 */

const WIDTH = 80;

function walk(command: Command, path: string[] = []): Array<{ path: string; command: Command }> {
  const here = { path: ['crm-sync', ...path].join(' '), command };
  return [here, ...command.commands.flatMap((c) => walk(c, [...path, c.name()]))];
}

function helpOf(command: Command): string {
  let out = '';
  command.configureOutput({ writeOut: (s) => (out += s), getOutHelpWidth: () => WIDTH });
  command.outputHelp();
  return out;
}

/** Where a line breaks though the next line's first word would have fitted on it. */
export function earlyBreaks(text: string): string[] {
  const lines = text.split('\n');
  const found: string[] = [];
  let examples = false;
  for (let i = 0; i + 1 < lines.length; i++) {
    const a = lines[i]!.trimEnd();
    const b = lines[i + 1]!;
    // Example command lines are items of their own, until the blank line that ends the list.
    if (/^Examples?:$/.test(a)) examples = true;
    if (a.trim() === '') examples = false;
    if (examples || a.endsWith('\\') || a.trim() === '' || b.trim() === '') continue;
    // A sentence or a heading may end a line; so may a list item's last word before the next item.
    if (/[.:!?]$/.test(a)) continue;
    const indentA = /^\s*/.exec(a)![0].length;
    const indentB = /^\s*/.exec(b)![0].length;
    // A new item of a list or a column: an option, a command, an exit code, an example line.
    if (indentB <= indentA && /^\s*(-|\d+\s\s|crm-sync\s|[a-z][\w-]*( \[[^\]]*\]| <[^>]*>)*\s\s)/.test(b)) continue;
    if (indentB < indentA) continue;
    const word = b.trim().split(/\s+/)[0]!;
    if (a.length + 1 + word.length <= WIDTH) found.push(`${a}⏎${b.trim()}`);
  }
  return found;
}

describe('help text at 80 columns', () => {
  it('every command: no line over 80 columns, no line broken inside a sentence', async () => {
    const program = buildProgram(await registrationsFor([]));
    const commands = walk(program);
    expect(commands.length).toBeGreaterThan(20);
    const problems: string[] = [];
    for (const { path, command } of commands) {
      const help = helpOf(command);
      for (const line of help.split('\n'))
        if (line.length > WIDTH) problems.push(`${path}: ${line.length} columns: ${line}`);
      for (const early of earlyBreaks(help)) problems.push(`${path}: broken mid-sentence: ${early}`);
    }
    expect(problems).toEqual([]);
  });

  it('command descriptions start with a capital letter, option descriptions with a small one', async () => {
    const program = buildProgram(await registrationsFor([]));
    const problems: string[] = [];
    for (const { path, command } of walk(program)) {
      for (const sub of command.commands) {
        const text = sub.description();
        if (!/^[A-Z]/.test(text)) problems.push(`${path} ${sub.name()}: "${text.slice(0, 40)}"`);
      }
      for (const option of command.options) {
        if (!/^([a-z"(<$]|[A-Z]{2,}\b)/.test(option.description))
          problems.push(`${path} ${option.flags}: "${option.description}"`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('the check itself finds a break inside a sentence', () => {
    expect(
      earlyBreaks(
        'Resume a run blocked by a refused API key (fix the key first; this lifts the\nworkspace block, not an\noperator pause)',
      ),
    ).toHaveLength(1);
    expect(earlyBreaks('One sentence ends here.\nAnother starts.')).toEqual([]);
  });
});
