// The Markdown the answer and statistics previews show, built from what the server returns (no VS Code API here,
// so that `node --test` can check it).

/** Markdown text of an answer, whatever shape the server gave it. */
export function markdownOf(result: unknown): string {
  if (typeof result === 'string') {
    return result;
  }
  if (result && typeof result === 'object') {
    const r = result as Record<string, unknown>;
    for (const key of ['markdown', 'answer', 'value', 'contents']) {
      const v = r[key];
      if (typeof v === 'string') {
        return v;
      }
      if (v && typeof v === 'object' && typeof (v as { value?: unknown }).value === 'string') {
        return (v as { value: string }).value;
      }
    }
  }
  return '```json\n' + JSON.stringify(result, null, 2) + '\n```';
}

/**
 * The Markdown preview refuses `file:` links (it shows them as raw text), and the server's locations are file links
 * whose label already names the place (`sample.py:4`): keep the label, as code.
 */
export function withoutFileLinks(markdown: string): string {
  return markdown.replace(/\[([^\]\n]+)\]\(file:\/\/[^)\s]+\)/g, '`$1`');
}

/** The header over an answer still being written (the server's `$/progress` deltas on the ask's token). */
export const STREAMING = '*Generated answer (being written…)*';

/** The preview of an answer while it streams: the question, the header and the text so far. */
export function streamingMarkdown(question: string, streamed: string): string {
  return `> ${question}\n\n${STREAMING}\n\n${withoutFileLinks(streamed)}\n`;
}

/** The text of an ask's `$/progress` value (`{delta: string}`), or undefined when it is not one. */
export function deltaOf(value: unknown): string | undefined {
  const delta = value && typeof value === 'object' ? (value as { delta?: unknown }).delta : undefined;
  return typeof delta === 'string' ? delta : undefined;
}

export function statsMarkdown(stats: Record<string, unknown>): string {
  const rows = Object.keys(stats)
    .sort()
    .map((k) => `| ${k} | ${stats[k] === null ? '–' : JSON.stringify(stats[k])} |`);
  return ['# waferline statistics', '', '| figure | value |', '|---|---|', ...rows, ''].join('\n');
}
