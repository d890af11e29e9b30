/**
 * The live denoising view: with the server setting `liveView` on, every fill streams
 * `infill/denoiseStep` (docs/LSP.md) with each span's text after the step (`░` a slot
 * still masked, `∅` a dropped one). This module decides what text goes where; the
 * extension draws it as ghost-text decorations and removes them when the request ends.
 * Pure: no `vscode` import; positions are document offsets.
 */

export const STEP_NOTIFICATION = 'infill/denoiseStep';

export interface StepSpan {
  index: number;
  text: string;
  /** An LSP range, when the server sends one (positions then win over anchors). */
  range?: unknown;
}

export interface StepParams {
  uri: string;
  version: number;
  requestId: number | string;
  operation: string;
  step: number;
  spans: StepSpan[];
}

export interface Placed {
  offset: number;
  text: string;
}

const NULL_SLOT = /∅/g;

/** The text shown for a span: dropped slots removed, line breaks as ⏎ (decorations are one line). */
export function displayText(text: string): string {
  return text.replace(NULL_SLOT, '').replace(/\r\n|\r|\n/g, '⏎');
}

/**
 * The offset where each hole marker starts: where Fill holes shows each hole's text.
 * Follows the marker syntax of infill/spans.py as far as placing text needs: a bracketed
 * marker `<name>` also matches `<name:N>`; any other marker matches as it is.
 */
export function holeStarts(text: string, marker = '<mask>'): number[] {
  const bracketed = marker.length >= 3 && marker.startsWith('<') && marker.endsWith('>');
  const head = bracketed ? marker.slice(0, -1) : marker;
  const out: number[] = [];
  let from = 0;
  for (;;) {
    const at = text.indexOf(head, from);
    if (at < 0) break;
    const next = text.charAt(at + head.length);
    if (!bracketed || next === '>' || next === ':') out.push(at);
    from = at + head.length;
  }
  return out;
}

/**
 * Where the spans' texts go: each at its own offset when every span has one (from the
 * notification's ranges, else from the request's anchors, one per span), else all of
 * them together at the first anchor (or `fallback`, the cursor).
 */
export function layout(spans: readonly StepSpan[], offsets: readonly (number | undefined)[],
    anchors: readonly number[] | undefined, fallback: number): Placed[] {
  const each = spans.map((_, i) => offsets[i] ?? anchors?.[i]);
  if (spans.length > 0 && each.every((o) => o !== undefined)) {
    return spans.map((s, i) => ({ offset: each[i] as number, text: displayText(s.text) }));
  }
  if (spans.length === 0) return [];
  return [{ offset: anchors?.[0] ?? fallback, text: spans.map((s) => displayText(s.text)).join(' │ ') }];
}

/** Per document: the anchors of the request a command is running, and what is shown. */
export class LiveState {
  private readonly expected = new Map<string, number[]>();
  private readonly shown = new Map<string, string | number>(); // uri -> requestId shown

  /** A command is about to send a request on `uri` whose spans start at `anchors`. */
  expect(uri: string, anchors: number[]): void {
    this.expected.set(uri, anchors);
  }

  /**
   * What to show for a step, or undefined when it is for another version of the document
   * (the result will be dropped as well).
   */
  step(p: StepParams, version: number | undefined, offsets: readonly (number | undefined)[],
      cursor: number): Placed[] | undefined {
    if (version === undefined || version !== p.version) return undefined;
    this.shown.set(p.uri, p.requestId);
    // a command's anchors are for its own request, not for a completion running beside it
    const anchors = p.operation === 'completion' ? undefined : this.expected.get(p.uri);
    return layout(p.spans, offsets, anchors, cursor);
  }

  /** The request on `uri` ended: true when something was shown (to be cleared). */
  end(uri: string): boolean {
    this.expected.delete(uri);
    return this.shown.delete(uri);
  }

  showing(uri: string): boolean {
    return this.shown.has(uri);
  }
}
