/**
 * Settings: which of the extension's settings are the server's (section "infill",
 * docs/LSP.md), the server command, the languages served. Pure: no `vscode` import, so
 * the unit tests run under plain Node.
 *
 * The server's setting names are read from the manifest (package.json
 * `contributes.configuration`), the one list in the extension; a Python test checks that
 * list and its defaults against the server's own (lsp/settings.py).
 */

/** Settings of the extension itself, never sent to the server (it warns on unknown names). */
export const CLIENT_SETTINGS = ['pythonPath', 'serverCommand', 'languages', 'trace'] as const;

/** Changing one of these restarts the server (the others are pushed to it). */
export const RESTART_SETTINGS = ['pythonPath', 'serverCommand', 'languages'] as const;

export const SECTION = 'infill';

export interface Manifest {
  contributes?: { configuration?: { properties?: Record<string, unknown> } };
}

/** The server's setting names (`modelDir`, `steps`, ...) declared in the manifest. */
export function serverSettingNames(manifest: Manifest): string[] {
  const props = manifest.contributes?.configuration?.properties ?? {};
  const out: string[] = [];
  for (const key of Object.keys(props)) {
    if (!key.startsWith(SECTION + '.')) continue;
    const name = key.slice(SECTION.length + 1);
    const head = name.split('.')[0];
    if (!(CLIENT_SETTINGS as readonly string[]).includes(head)) out.push(name);
  }
  return out;
}

/**
 * The settings payload for the server: each name's value from `get` (the effective value:
 * the user's, else the manifest's default), leaving out unset ones (null, undefined, '')
 * so that the server uses its own default for them.
 */
export function serverSettings(get: (name: string) => unknown, names: readonly string[]):
    Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const name of names) {
    const value = get(name);
    if (value === undefined || value === null || value === '') continue;
    out[name] = value;
  }
  return out;
}

export interface ServerCommand {
  command: string;
  args: string[];
}

/** `serverCommand` when set, else `pythonPath -m diffusion_infill.lsp.server` (python3 by default). */
export function serverCommand(pythonPath: unknown, custom: unknown): ServerCommand {
  if (Array.isArray(custom) && custom.length > 0 && custom.every((s) => typeof s === 'string')) {
    const [command, ...args] = custom as string[];
    return { command, args };
  }
  const python = typeof pythonPath === 'string' && pythonPath.trim() ? pythonPath.trim() : 'python3';
  return { command: python, args: ['-m', 'diffusion_infill.lsp.server'] };
}

/** Python, then the user's languages, without repeats. */
export function languages(extra: unknown): string[] {
  const out = ['python'];
  if (Array.isArray(extra)) {
    for (const lang of extra) {
      if (typeof lang === 'string' && lang.trim() && !out.includes(lang.trim())) out.push(lang.trim());
    }
  }
  return out;
}

export interface DocumentFilter {
  scheme: string;
  language: string;
}

/** The documents the client serves: saved files and untitled buffers of those languages. */
export function documentSelector(langs: readonly string[]): DocumentFilter[] {
  return langs.flatMap((language) => [
    { scheme: 'file', language },
    { scheme: 'untitled', language },
  ]);
}
