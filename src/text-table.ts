/**
 * Plain-text tables for what the CLI and the scripts print (version, the run summary,
 * management status, hosts list, gather's files, benchmark records): each column padded to
 * its widest cell, two spaces between columns, the last column left unpadded and no line
 * ending in spaces.
 */

export interface TableOptions {
  /** Which cells are padded on the left (numbers, sizes). Default: none, every cell is left-aligned. */
  alignRight?: (cell: string, column: number) => boolean;
}

/** The header line, then one line per row. */
export function formatTable(header: readonly string[], rows: readonly (readonly string[])[], options: TableOptions = {}): string[] {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  const alignRight = options.alignRight ?? (() => false);
  const cell = (value: string, i: number, last: boolean) => (alignRight(value, i) ? value.padStart(widths[i] ?? 0) : last ? value : value.padEnd(widths[i] ?? 0));
  return all.map((r) =>
    r
      .map((value, i) => cell(value, i, i === r.length - 1))
      .join('  ')
      .trimEnd(),
  );
}
