/**
 * The VS Code client of `infill-lsp` (docs/EDITORS.md). The thin layer over the VS Code
 * API: it starts the server with vscode-languageclient, passes the settings, runs the
 * server's code actions from commands, shows the status bar item and the live view. What
 * can be decided without VS Code lives in settings.ts, actions.ts, status.ts and live.ts
 * (unit-tested under plain Node). No model logic here.
 */

import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import {
  CodeAction,
  CodeActionRequest,
  CodeActionResolveRequest,
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ProgressToken,
  Range as LspRange,
  ResponseError,
  ServerOptions,
  State,
  WorkDoneProgress,
  WorkDoneProgressCancelNotification,
  WorkDoneProgressCreateRequest,
} from 'vscode-languageclient/node';

import { COMMANDS, codeActionParams, errorMessage, pickAction } from './actions';
import { holeStarts, LiveState, Placed, STEP_NOTIFICATION, StepParams } from './live';
import {
  documentSelector, languages, Manifest, RESTART_SETTINGS, SECTION, serverCommand, serverSettingNames,
  serverSettings,
} from './settings';
import { Busy, formatInfo, ServerState, statusText, WorkerInfo } from './status';

class Extension implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private readonly output = vscode.window.createOutputChannel('Infill');
  private readonly statusItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
  private readonly busy = new Busy();
  private readonly live = new LiveState();
  private readonly liveDecoration = vscode.window.createTextEditorDecorationType({
    after: { color: new vscode.ThemeColor('editorGhostText.foreground'), fontStyle: 'italic' },
  });
  private readonly names: string[];
  private state: ServerState = 'stopped';
  private info: WorkerInfo | undefined;
  private infoError: string | undefined;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly context: vscode.ExtensionContext) {
    const manifest = JSON.parse(
      fs.readFileSync(path.join(context.extensionPath, 'package.json'), 'utf8')) as Manifest;
    this.names = serverSettingNames(manifest);
    this.statusItem.command = 'infill.showWorkerInfo';
    this.render();
    this.statusItem.show();
    const command = (id: string, fn: () => unknown) =>
      this.disposables.push(vscode.commands.registerCommand(id, fn));
    for (const id of Object.keys(COMMANDS)) command(id, () => this.runAction(id));
    command('infill.restartServer', () => this.restart());
    command('infill.showServerLog', () => this.output.show(true));
    command('infill.showWorkerInfo', () => this.showInfo());
    this.disposables.push(vscode.workspace.onDidChangeConfiguration((e) => this.configChanged(e)));
  }

  // -- settings --------------------------------------------------------------------------

  private config(): vscode.WorkspaceConfiguration {
    return vscode.workspace.getConfiguration(SECTION);
  }

  /** The server's settings (section "infill"), from the user's and default values. */
  private settings(): Record<string, unknown> {
    const config = this.config();
    return serverSettings((name) => config.get(name), this.names);
  }

  private async configChanged(e: vscode.ConfigurationChangeEvent): Promise<void> {
    if (!e.affectsConfiguration(SECTION)) return;
    if (RESTART_SETTINGS.some((name) => e.affectsConfiguration(`${SECTION}.${name}`))) {
      await this.restart();
    } else if (this.client?.state === State.Running) {
      await this.client.sendNotification(DidChangeConfigurationNotification.type,
        { settings: { [SECTION]: this.settings() } });
      if (!this.config().get('liveView')) this.clearLive();
    }
  }

  // -- the server ------------------------------------------------------------------------

  async start(): Promise<void> {
    const config = this.config();
    const { command, args } = serverCommand(config.get('pythonPath'), config.get('serverCommand'));
    const serverOptions: ServerOptions = { command, args };
    const clientOptions: LanguageClientOptions = {
      documentSelector: documentSelector(languages(config.get('languages'))),
      initializationOptions: { [SECTION]: this.settings() },
      outputChannel: this.output,
      middleware: {
        workspace: {
          // a pull of section "infill" gets the server's settings only (not pythonPath...)
          configuration: async (params, token, next) => {
            const values = await next(params, token);
            if (!Array.isArray(values)) return values;
            return params.items.map((item, i) => (item.section === SECTION ? this.settings() : values[i]));
          },
        },
        provideInlineCompletionItems: async (document, position, context, token, next) => {
          try {
            return await next(document, position, context, token);
          } finally {
            this.endLive(document.uri.toString());
          }
        },
        resolveCodeAction: async (item, token, next) => {
          try {
            return await next(item, token);
          } finally {
            this.clearLive();
          }
        },
      },
    };
    const client = new LanguageClient('infill', 'Infill', serverOptions, clientOptions);
    client.registerProposedFeatures(); // inline completion (LSP 3.18) in languageclient 9
    client.onDidChangeState((e) => {
      this.state = e.newState === State.Running ? 'running' : e.newState === State.Starting ? 'starting' : 'stopped';
      if (this.state !== 'running') this.busy.clear();
      void vscode.commands.executeCommand('setContext', 'infill.active', this.state === 'running');
      this.render();
    });
    this.client = client;
    this.state = 'starting';
    this.info = undefined;
    this.infoError = undefined;
    this.render();
    try {
      await client.start();
    } catch (err) {
      this.state = 'stopped';
      this.render();
      void vscode.window.showErrorMessage(
        `Infill: could not start the language server (${command} ${args.join(' ')}): ${String(err)}. ` +
        'Set "infill.pythonPath" to a Python that has the project installed.', 'Show server log')
        .then((pick) => pick && this.output.show(true));
      return;
    }
    // After start, replacing languageclient's own handler: the progress also drives the
    // status bar, and shows as a notification whose Cancel cancels the request.
    client.onRequest(WorkDoneProgressCreateRequest.type, ({ token }) => this.trackProgress(client, token));
    client.onNotification(STEP_NOTIFICATION, (p: StepParams) => this.step(client, p));
    void this.fetchInfo(client);
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.clearLive();
    if (client) {
      try {
        await client.stop();
      } catch {
        // stopping a client that never started
      }
    }
    this.state = 'stopped';
    this.render();
  }

  private async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  private async fetchInfo(client: LanguageClient): Promise<WorkerInfo | undefined> {
    try {
      const info = await client.sendRequest(ExecuteCommandRequest.type,
        { command: 'infill.workerInfo', arguments: [] }) as WorkerInfo;
      this.info = info;
      this.infoError = undefined;
    } catch (err) {
      this.infoError = err instanceof ResponseError ? err.message : String(err);
    }
    this.render();
    return this.info;
  }

  private async showInfo(): Promise<void> {
    if (!this.client || this.client.state !== State.Running) {
      void vscode.window.showWarningMessage('Infill: the language server is not running.');
      return;
    }
    const info = await this.fetchInfo(this.client);
    if (info) {
      const lines = formatInfo(info);
      this.output.appendLine(`[info] ${lines.join('\n       ')}`);
      void vscode.window.showInformationMessage(`Infill: ${lines[0]}`, { detail: lines.slice(1).join('\n') });
    } else {
      void vscode.window.showWarningMessage(`Infill: the model worker is not available: ${this.infoError}`);
    }
  }

  // -- status and progress ---------------------------------------------------------------

  private render(): void {
    const s = statusText({ state: this.state, info: this.info, infoError: this.infoError, busy: this.busy });
    this.statusItem.text = s.text;
    this.statusItem.tooltip = s.tooltip;
  }

  private trackProgress(client: LanguageClient, token: ProgressToken): void {
    let finish: (() => void) | undefined;
    let ended = false;
    let reporter: vscode.Progress<{ message?: string }> | undefined;
    const sub = client.onProgress(WorkDoneProgress.type, token, (value) => {
      if (value.kind === 'begin') {
        this.busy.begin(token, value.title, value.message);
        void vscode.window.withProgress({
          location: vscode.ProgressLocation.Notification,
          title: /^infill\b/i.test(value.title) ? value.title : `Infill: ${value.title}`,
          cancellable: value.cancellable === true,
        }, (progress, cancel) => {
          reporter = progress;
          if (value.message) progress.report({ message: value.message });
          cancel.onCancellationRequested(() =>
            void client.sendNotification(WorkDoneProgressCancelNotification.type, { token }));
          return new Promise<void>((resolve) => {
            finish = resolve;
            if (ended) resolve();
          });
        });
      } else if (value.kind === 'report') {
        this.busy.report(token, value.message);
        reporter?.report({ message: value.message });
      } else {
        ended = true;
        this.busy.end(token);
        finish?.();
        sub.dispose();
        if (this.busy.count === 0 && this.client === client) void this.fetchInfo(client);
      }
      this.render();
    });
  }

  // -- commands --------------------------------------------------------------------------

  private async runAction(id: string): Promise<void> {
    const spec = COMMANDS[id];
    const editor = vscode.window.activeTextEditor;
    const client = this.client;
    if (!editor) return;
    if (!client || client.state !== State.Running) {
      void vscode.window.showWarningMessage('Infill: the language server is not running.');
      return;
    }
    const doc = editor.document;
    const uri = doc.uri.toString();
    const sel = editor.selection;
    let range: vscode.Range = new vscode.Range(sel.active, sel.active);
    if (spec.target === 'selection') {
      if (sel.isEmpty) {
        void vscode.window.showWarningMessage(spec.empty ?? 'Infill: select some code first.');
        return;
      }
      range = sel;
    } else if (spec.target === 'selectionOrLine') {
      range = sel.isEmpty ? doc.lineAt(sel.active.line).range : sel;
    }
    const c2p = client.code2ProtocolConverter;
    try {
      const actions = await client.sendRequest(CodeActionRequest.type,
        codeActionParams(uri, c2p.asRange(range), spec.kind)) ?? [];
      const picked = pickAction<CodeAction>(actions, spec.kind);
      if ('reason' in picked) {
        void vscode.window.showInformationMessage(picked.reason);
        return;
      }
      const anchors = spec.kind === COMMANDS['infill.fillHoles'].kind
        ? holeStarts(doc.getText(), String(this.config().get('holeMarker') ?? '<mask>'))
        : [doc.offsetAt(spec.kind === COMMANDS['infill.insertDocstring'].kind
          ? doc.lineAt(range.start.line).range.end : range.start)];
      this.live.expect(uri, anchors);
      const action = picked.action.edit
        ? picked.action
        : await client.sendRequest(CodeActionResolveRequest.type, picked.action);
      if (action.edit) {
        const edit = await client.protocol2CodeConverter.asWorkspaceEdit(action.edit);
        if (!await vscode.workspace.applyEdit(edit)) {
          void vscode.window.showWarningMessage('Infill: the edit could not be applied.');
        }
      }
      if (action.command) {
        await vscode.commands.executeCommand(action.command.command, ...(action.command.arguments ?? []));
      }
    } catch (err) {
      const msg = err instanceof ResponseError ? errorMessage(err.code, err.message) : `Infill: ${String(err)}`;
      if (msg) void vscode.window.showWarningMessage(msg);
    } finally {
      this.endLive(uri);
    }
  }

  // -- live view -------------------------------------------------------------------------

  private step(client: LanguageClient, p: StepParams): void {
    if (this.config().get('liveView') !== true || !Array.isArray(p.spans)) return;
    const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === p.uri);
    if (!doc) return;
    const editor = vscode.window.visibleTextEditors.find((e) => e.document === doc);
    const cursor = editor ? doc.offsetAt(editor.selection.active) : 0;
    const offsets = p.spans.map((s) => {
      const r = s.range as LspRange | undefined;
      if (!r || typeof r.start !== 'object') return undefined;
      return doc.offsetAt(client.protocol2CodeConverter.asRange(r).start);
    });
    const placed = this.live.step(p, doc.version, offsets, cursor);
    if (placed) this.draw(doc, placed);
  }

  private draw(doc: vscode.TextDocument, placed: Placed[]): void {
    const decorations = placed.map((p) => {
      const pos = doc.positionAt(p.offset);
      return { range: new vscode.Range(pos, pos), renderOptions: { after: { contentText: p.text } } };
    });
    for (const editor of vscode.window.visibleTextEditors) {
      if (editor.document === doc) editor.setDecorations(this.liveDecoration, decorations);
    }
  }

  private endLive(uri: string): void {
    if (!this.live.end(uri)) return;
    for (const editor of vscode.window.visibleTextEditors) {
      if (editor.document.uri.toString() === uri) editor.setDecorations(this.liveDecoration, []);
    }
  }

  private clearLive(): void {
    for (const editor of vscode.window.visibleTextEditors) {
      this.live.end(editor.document.uri.toString());
      editor.setDecorations(this.liveDecoration, []);
    }
  }

  dispose(): void {
    void this.stop();
    for (const d of this.disposables) d.dispose();
    this.statusItem.dispose();
    this.liveDecoration.dispose();
    this.output.dispose();
  }
}

let extension: Extension | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  extension = new Extension(context);
  context.subscriptions.push(extension);
  await extension.start();
}

export async function deactivate(): Promise<void> {
  await extension?.stop();
  extension = undefined;
}
