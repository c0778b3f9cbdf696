/** A unified line diff (longest common subsequence), with context lines, for readable object diffs. */

export interface DiffLine {
  op: ' ' | '-' | '+';
  text: string;
}

/** The edit script turning `before` into `after`, line by line. */
export function diffLines(before: readonly string[], after: readonly string[]): DiffLine[] {
  // Trim the common head and tail first: typical object diffs change a few lines.
  let head = 0;
  while (head < before.length && head < after.length && before[head] === after[head]) head++;
  let tail = 0;
  while (tail < before.length - head && tail < after.length - head && before[before.length - 1 - tail] === after[after.length - 1 - tail]) tail++;
  const a = before.slice(head, before.length - tail);
  const b = after.slice(head, after.length - tail);
  const n = a.length;
  const m = b.length;
  // lcs[i][j]: length of the LCS of a[i..] and b[j..].
  const lcs: Uint32Array[] = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    const row = lcs[i]!;
    const next = lcs[i + 1]!;
    for (let j = m - 1; j >= 0; j--) row[j] = a[i] === b[j] ? next[j + 1]! + 1 : Math.max(next[j]!, row[j + 1]!);
  }
  const middle: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      middle.push({ op: ' ', text: a[i]! });
      i++;
      j++;
    } else if (lcs[i + 1]![j]! >= lcs[i]![j + 1]!) middle.push({ op: '-', text: a[i++]! });
    else middle.push({ op: '+', text: b[j++]! });
  }
  while (i < n) middle.push({ op: '-', text: a[i++]! });
  while (j < m) middle.push({ op: '+', text: b[j++]! });
  return [
    ...before.slice(0, head).map((text) => ({ op: ' ' as const, text })),
    ...middle,
    ...before.slice(before.length - tail).map((text) => ({ op: ' ' as const, text })),
  ];
}

/** Unified diff text with `context` lines around changes; empty string when equal. */
export function unifiedDiff(before: string, after: string, labels: { before: string; after: string }, context = 3): string {
  const beforeLines = splitLines(before);
  const afterLines = splitLines(after);
  const lines = diffLines(beforeLines, afterLines);
  if (!lines.some((l) => l.op !== ' ')) return '';
  const out = [`--- ${labels.before}`, `+++ ${labels.after}`];
  let index = 0;
  let beforeLine = 1;
  let afterLine = 1;
  const positions = lines.map((line) => {
    const at = { before: beforeLine, after: afterLine };
    if (line.op !== '+') beforeLine++;
    if (line.op !== '-') afterLine++;
    return at;
  });
  while (index < lines.length) {
    const firstChange = lines.findIndex((l, k) => k >= index && l.op !== ' ');
    if (firstChange < 0) break;
    const start = Math.max(index, firstChange - context);
    let end = firstChange;
    // Extend the hunk while the next change is within 2×context lines.
    for (let k = firstChange; k < lines.length; k++) {
      if (lines[k]!.op !== ' ') end = k;
      else if (k - end > 2 * context) break;
    }
    const stop = Math.min(lines.length, end + context + 1);
    const hunk = lines.slice(start, stop);
    const from = positions[start]!;
    const beforeCount = hunk.filter((l) => l.op !== '+').length;
    const afterCount = hunk.filter((l) => l.op !== '-').length;
    out.push(`@@ -${from.before},${beforeCount} +${from.after},${afterCount} @@`);
    for (const line of hunk) out.push(`${line.op}${line.text}`);
    index = stop;
  }
  return out.join('\n') + '\n';
}

function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines;
}
