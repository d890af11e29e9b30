/**
 * The status bar item's text: the worker's model and device (from the server command
 * `infill.workerInfo`) and whether a request is running (from `$/progress`). Pure: no
 * `vscode` import.
 */

/** The reply of `infill.workerInfo` (docs/LSP.md). */
export interface WorkerInfo {
  model?: string;
  device?: string;
  precision?: string; // bf16, fp32, int8; "" or absent: not said
  versions?: Record<string, unknown>;
  limits?: Record<string, unknown>;
  batching?: unknown;
  counters?: Record<string, unknown>;
}

/** The `$/progress` work in flight, by token. */
export class Busy {
  private readonly work = new Map<string, { title: string; message?: string }>();
  private last: string | undefined; // the token reported last

  begin(token: string | number, title: string, message?: string): void {
    this.work.set(String(token), { title, message });
    this.last = String(token);
  }

  report(token: string | number, message?: string): void {
    const w = this.work.get(String(token));
    if (w === undefined) return;
    if (message !== undefined) w.message = message;
    this.last = String(token);
  }

  end(token: string | number): void {
    this.work.delete(String(token));
    if (this.last === String(token)) this.last = [...this.work.keys()].pop();
  }

  clear(): void {
    this.work.clear();
    this.last = undefined;
  }

  get count(): number {
    return this.work.size;
  }

  /** "title: message" of the work reported last, if any. */
  get current(): string | undefined {
    const w = this.last === undefined ? undefined : this.work.get(this.last);
    if (w === undefined) return undefined;
    return w.message ? `${w.title}: ${w.message}` : w.title;
  }
}

export type ServerState = 'starting' | 'running' | 'stopped';

export interface StatusInput {
  state: ServerState;
  info?: WorkerInfo;
  infoError?: string;
  busy?: Busy;
}

export interface StatusText {
  text: string;
  tooltip: string;
}

/** The status bar text (with codicons) and tooltip. */
export function statusText(s: StatusInput): StatusText {
  if (s.state === 'stopped') {
    return { text: '$(circle-slash) infill', tooltip: 'Infill: the language server is not running' };
  }
  const device = s.info ? `${s.info.device ?? '?'}${s.info.precision ? ` ${s.info.precision}` : ''}` : '';
  const model = s.info ? `${s.info.model ?? '?'} · ${device}` : undefined;
  const busy = s.busy?.current;
  if (busy !== undefined) {
    const more = (s.busy?.count ?? 0) > 1 ? ` (+${(s.busy?.count ?? 1) - 1})` : '';
    return {
      text: `$(loading~spin) infill: ${busy}${more}`,
      tooltip: `Infill${model ? ` (${model})` : ''}: ${busy}`,
    };
  }
  if (s.infoError !== undefined) {
    return { text: '$(warning) infill', tooltip: `Infill: the model worker is not available: ${s.infoError}` };
  }
  if (s.state === 'starting' || model === undefined) {
    return { text: '$(loading~spin) infill', tooltip: 'Infill: starting the server and the model worker' };
  }
  return { text: `$(sparkle) infill: ${model}`, tooltip: `Infill: model ${s.info?.model} on ${device}` };
}

function show(v: unknown): string {
  return typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v);
}

/** Lines describing a worker (the "Show worker info" command). */
export function formatInfo(info: WorkerInfo): string[] {
  const precision = info.precision ? ` (${info.precision})` : '';
  const out = [`model ${info.model ?? '?'} on ${info.device ?? '?'}${precision}`];
  for (const key of ['versions', 'limits', 'batching', 'counters'] as const) {
    const v = info[key];
    if (v === undefined || v === null) continue;
    if (typeof v === 'object') {
      const parts = Object.keys(v).sort().map((k) => `${k}=${show((v as Record<string, unknown>)[k])}`);
      out.push(`${key}: ${parts.join(', ')}`);
    } else {
      out.push(`${key}: ${show(v)}`);
    }
  }
  return out;
}
