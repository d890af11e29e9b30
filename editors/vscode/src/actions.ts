/**
 * The editor commands that run the server's code actions (docs/LSP.md), by kind: ask for
 * the actions of that kind only, take the first enabled one, resolve it, apply its edit.
 * Pure: no `vscode` import.
 */

export const KINDS = {
  fillHoles: 'refactor.rewrite.infill.fillHoles',
  rewriteSelection: 'refactor.rewrite.infill.rewriteSelection',
  insertDocstring: 'refactor.rewrite.infill.insertDocstring',
  fixSelection: 'refactor.rewrite.infill.fixSelection',
  quickFix: 'quickfix.infill',
} as const;

/** What a command works on. */
export type Target = 'cursor' | 'selection' | 'selectionOrLine';

export interface ActionCommand {
  kind: string;
  target: Target;
  /** Said when the selection a command needs is empty. */
  empty?: string;
}

export const COMMANDS: Record<string, ActionCommand> = {
  'infill.fillHoles': { kind: KINDS.fillHoles, target: 'cursor' },
  'infill.insertDocstring': { kind: KINDS.insertDocstring, target: 'cursor' },
  'infill.rewriteSelection': {
    kind: KINDS.rewriteSelection, target: 'selection', empty: 'Select the code to rewrite first.',
  },
  'infill.fixSelection': { kind: KINDS.fixSelection, target: 'selectionOrLine' },
};

/** The parts of an LSP CodeAction used here. */
export interface CodeActionLike {
  title: string;
  kind?: string;
  disabled?: { reason: string };
  edit?: unknown;
  command?: unknown;
  data?: unknown;
}

export type Picked<T> = { action: T } | { reason: string };

/** The first enabled action of exactly `kind`, else why there is none. */
export function pickAction<T extends CodeActionLike>(actions: readonly (T | { command: string })[],
    kind: string): Picked<T> {
  let reason: string | undefined;
  for (const item of actions) {
    if (!('title' in item) || typeof (item as T).title !== 'string') continue; // a bare Command
    const action = item as T;
    if (action.kind !== kind) continue;
    if (action.disabled === undefined) return { action };
    reason = reason ?? action.disabled.reason;
  }
  return { reason: reason ?? `Infill: nothing to do here (no ${kind} action).` };
}

export interface LspPosition { line: number; character: number }
export interface LspRange { start: LspPosition; end: LspPosition }

/** `textDocument/codeAction` params asking for one kind, explicitly invoked. */
export function codeActionParams<R extends LspRange, D>(uri: string, range: R, kind: string,
    diagnostics: D[] = []) {
  return {
    textDocument: { uri },
    range,
    context: { diagnostics, only: [kind], triggerKind: 1 as const /* Invoked */ },
  };
}

export const CONTENT_MODIFIED = -32801;
export const REQUEST_CANCELLED = -32800;

/** What to tell the user about a failed request; undefined: nothing (a cancel). */
export function errorMessage(code: number | undefined, message: string): string | undefined {
  if (code === REQUEST_CANCELLED) return undefined;
  if (code === CONTENT_MODIFIED) {
    return 'Infill: the document changed while the model worked; nothing was applied.';
  }
  return `Infill: ${message}`;
}
