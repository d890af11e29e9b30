--- The Neovim client of `infill-lsp` (docs/EDITORS.md).
---
--- Thin on purpose: it configures the language server through `vim.lsp.config` /
--- `vim.lsp.enable` (Neovim 0.11+), passes the settings (section "infill", the server's
--- names: docs/LSP.md), turns on `vim.lsp.inline_completion` (0.12) for the buffers the
--- server attaches to, runs the server's code actions by kind from user commands, and
--- renders the live denoising view (lua/infill/live.lua). No model logic lives here.
---
---   require('infill').setup({ settings = { liveView = true }, keymaps = true })

local live = require('infill.live')

local M = {}

M.name = 'infill' -- the vim.lsp.config name of the server

--- The server's code action kinds (docs/LSP.md); commands pick actions by these.
M.kinds = {
  fill = 'refactor.rewrite.infill.fillHoles',
  rewrite = 'refactor.rewrite.infill.rewriteSelection',
  docstring = 'refactor.rewrite.infill.insertDocstring',
  fix = 'refactor.rewrite.infill.fixSelection',
  quickfix = 'quickfix.infill',
}

---@class infill.Options
M.defaults = {
  -- how to start the server: `infill-lsp` on PATH, or e.g. { 'python3', '-m', 'diffusion_infill.lsp.server' }
  cmd = { 'infill-lsp' },
  -- filetypes served besides python (which always is)
  filetypes = {},
  -- files that mark a project root (none found: the server runs for the single file)
  root_markers = { 'pyproject.toml', 'setup.py', 'setup.cfg', '.git' },
  -- the server's settings, section "infill": modelDir, workerAddress, steps, threshold,
  -- maxTokens, holeMarker, diagnostics, liveView, ... (docs/LSP.md, "Settings")
  settings = {},
  -- show completions as ghost text with vim.lsp.inline_completion (Neovim 0.12+)
  inline_completion = true,
  -- true: the suggested keymaps (M.default_keymaps); a table: your own lhs per action
  -- ({ fill = '<leader>f', ... }, false drops one); false: none
  keymaps = false,
  -- the Python that :checkhealth tries to import the server with (nil: cmd[1] when it is
  -- a Python, else the interpreter named in the `infill-lsp` script, else python3)
  python = nil,
  -- more vim.lsp.config fields, passed through: cmd_cwd, cmd_env, capabilities, on_attach...
  lsp = {},
}

--- The suggested keymaps: lhs and modes per action (opt-in with `keymaps = true`).
M.default_keymaps = {
  fill = { lhs = '<leader>if', modes = { 'n' }, desc = 'Infill: fill holes' },
  docstring = { lhs = '<leader>id', modes = { 'n' }, desc = 'Infill: insert docstring' },
  fix = { lhs = '<leader>ix', modes = { 'n', 'x' }, desc = 'Infill: fix (selection)' },
  rewrite = { lhs = '<leader>ir', modes = { 'x' }, desc = 'Infill: rewrite selection' },
  info = { lhs = '<leader>ii', modes = { 'n' }, desc = 'Infill: worker info' },
  cancel = { lhs = '<leader>ic', modes = { 'n' }, desc = 'Infill: cancel' },
  accept = { lhs = '<M-l>', modes = { 'i' }, desc = 'Infill: accept inline completion' },
  next = { lhs = '<M-]>', modes = { 'i' }, desc = 'Infill: next inline completion' },
  previous = { lhs = '<M-[>', modes = { 'i' }, desc = 'Infill: previous inline completion' },
}

M.options = nil ---@type infill.Options? set by setup()

local function notify(msg, level)
  vim.notify('infill: ' .. msg, level or vim.log.levels.INFO)
end

--- The infill client attached to `bufnr` (0: current), or nil.
function M.client(bufnr)
  return vim.lsp.get_clients({ bufnr = bufnr or 0, name = M.name })[1]
end

local function need_client(bufnr)
  local client = M.client(bufnr)
  if not client then
    notify('no infill language server is attached to this buffer (see :checkhealth infill)',
      vim.log.levels.WARN)
  end
  return client
end

--- The current settings (section "infill") of the client, or of the setup.
function M.settings(client)
  local s = client and client.settings and client.settings.infill
  return s or (M.options and M.options.settings) or {}
end

-- positions and ranges ----------------------------------------------------------------

local function line_at(bufnr, row)
  return vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ''
end

--- An LSP position from a 0-based row and byte column, in the client's encoding.
local function position(bufnr, row, col, encoding)
  local line = line_at(bufnr, row)
  col = math.min(col, #line)
  return { line = row, character = vim.str_utfindex(line, encoding, col, false) }
end

--- The byte just after the character that starts at byte `col` (0-based) of `line`.
local function char_end(line, col)
  if col >= #line then
    return #line
  end
  return col + 1 + vim.str_utf_end(line, col + 1)
end

--- The range a command works on, as {start = {row, col}, end_ = {row, col}} (0-based rows,
--- byte columns, end exclusive): the last charwise visual selection when the command's
--- range is exactly its lines, else whole lines, else the cursor (empty).
function M.command_range(bufnr, cmd)
  if not cmd or (cmd.range or 0) == 0 then
    local cur = vim.api.nvim_win_get_cursor(0)
    return { start = { cur[1] - 1, cur[2] }, end_ = { cur[1] - 1, cur[2] } }
  end
  local vs = vim.api.nvim_buf_get_mark(bufnr, '<')
  local ve = vim.api.nvim_buf_get_mark(bufnr, '>')
  if vim.fn.visualmode() == 'v' and vs[1] == cmd.line1 and ve[1] == cmd.line2 then
    local last = line_at(bufnr, ve[1] - 1)
    return { start = { vs[1] - 1, vs[2] }, end_ = { ve[1] - 1, char_end(last, ve[2]) } }
  end
  return { start = { cmd.line1 - 1, 0 }, end_ = { cmd.line2 - 1, #line_at(bufnr, cmd.line2 - 1) } }
end

local function lsp_range(bufnr, r, encoding)
  return {
    start = position(bufnr, r.start[1], r.start[2], encoding),
    ['end'] = position(bufnr, r.end_[1], r.end_[2], encoding),
  }
end

-- code actions ---------------------------------------------------------------------------

--- The first action of `kind` among `actions`, and the reason of a disabled one.
function M.pick(actions, kind)
  local reason
  for _, action in ipairs(actions or {}) do
    if action.kind == kind then
      if action.disabled == nil then
        return action, nil
      end
      reason = reason or action.disabled.reason
    end
  end
  return nil, reason
end

local function apply(client, bufnr, action)
  if action.edit then
    vim.lsp.util.apply_workspace_edit(action.edit, client.offset_encoding)
  end
  if action.command then
    client:exec_cmd(action.command, { bufnr = bufnr })
  end
end

--- Runs the server's code action of `kind` on `range` (see M.command_range) of `bufnr`:
--- asks for the actions of that kind only, takes the first, resolves it (the model runs
--- then) and applies its edit. No prompt. `opts`: diagnostics (LSP diagnostics for the
--- context), anchors (live view positions), on_done(err) when finished.
function M.run_action(kind, bufnr, range, opts)
  opts = opts or {}
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local done = opts.on_done or function() end
  local client = need_client(bufnr)
  if not client then
    return done('no client')
  end
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    range = lsp_range(bufnr, range, client.offset_encoding),
    context = { diagnostics = opts.diagnostics or {}, only = { kind }, triggerKind = 1 },
  }
  client:request('textDocument/codeAction', params, function(err, actions)
    if err then
      notify(err.message, vim.log.levels.ERROR)
      return done(err.message)
    end
    local action, reason = M.pick(actions, kind)
    if not action then
      local msg = reason or ('nothing to do here (no %s action)'):format(kind)
      notify(msg, vim.log.levels.WARN)
      return done(msg)
    end
    if action.edit or not client:supports_method('codeAction/resolve') then
      apply(client, bufnr, action)
      return done(nil)
    end
    local request_id
    _, request_id = client:request('codeAction/resolve', action, function(rerr, resolved)
      live.finish(client.id, request_id)
      if rerr then
        local msg = rerr.code == -32801
            and 'the buffer changed while the model worked; nothing applied'
          or rerr.code == -32800 and 'cancelled'
          or rerr.message
        notify(msg, rerr.code == -32800 and vim.log.levels.INFO or vim.log.levels.WARN)
        return done(msg)
      end
      apply(client, bufnr, resolved or action)
      done(nil)
    end, bufnr)
    if request_id then
      live.track(client.id, request_id, bufnr, opts.anchors)
    end
  end, bufnr)
end

--- The start of every hole marker of the buffer ({row, col}, 0-based bytes): where the
--- live view shows each hole's text. Mirrors the marker syntax of infill/spans.py only as
--- far as rendering needs.
function M.hole_starts(bufnr, marker)
  marker = marker or '<mask>'
  local bracketed = #marker >= 3 and marker:sub(1, 1) == '<' and marker:sub(-1) == '>'
  local head = bracketed and marker:sub(1, -2) or marker
  local out = {}
  for row, line in ipairs(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)) do
    local init = 1
    while true do
      local s, e = line:find(head, init, true)
      if not s then
        break
      end
      local nxt = line:sub(e + 1, e + 1)
      if not bracketed or nxt == '>' or nxt == ':' then
        table.insert(out, { row - 1, s - 1 })
      end
      init = e + 1
    end
  end
  return out
end

local function line_end_anchor(bufnr)
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  return { { row, #line_at(bufnr, row) } }
end

--- :InfillFill: fill every hole marker of the buffer.
function M.fill(opts)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = need_client(bufnr)
  if not client then
    return
  end
  M.run_action(M.kinds.fill, bufnr, M.command_range(bufnr, nil), vim.tbl_extend('keep', opts or {}, {
    anchors = M.hole_starts(bufnr, M.settings(client).holeMarker),
  }))
end

--- :InfillDocstring: insert a docstring into the function or class around the cursor.
function M.docstring(opts)
  local bufnr = vim.api.nvim_get_current_buf()
  M.run_action(M.kinds.docstring, bufnr, M.command_range(bufnr, nil),
    vim.tbl_extend('keep', opts or {}, { anchors = line_end_anchor(bufnr) }))
end

--- :'<,'>InfillRewrite: rewrite the selection.
function M.rewrite(cmd, opts)
  local bufnr = vim.api.nvim_get_current_buf()
  if not cmd or (cmd.range or 0) == 0 then
    return notify('select the text to rewrite (:\'<,\'>InfillRewrite)', vim.log.levels.WARN)
  end
  local range = M.command_range(bufnr, cmd)
  M.run_action(M.kinds.rewrite, bufnr, range,
    vim.tbl_extend('keep', opts or {}, { anchors = { range.start } }))
end

--- :InfillFix: with a range, Fix selection; without, the quick fix of the infill
--- diagnostics on the cursor line, else Fix selection on the cursor line.
function M.fix(cmd, opts)
  local bufnr = vim.api.nvim_get_current_buf()
  opts = opts or {}
  if cmd and (cmd.range or 0) > 0 then
    local range = M.command_range(bufnr, cmd)
    return M.run_action(M.kinds.fix, bufnr, range,
      vim.tbl_extend('keep', opts, { anchors = { range.start } }))
  end
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  local whole = { start = { row, 0 }, end_ = { row, #line_at(bufnr, row) } }
  local diagnostics = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr, { lnum = row })) do
    local lsp = d.user_data and d.user_data.lsp
    if d.source == 'infill' and lsp then
      table.insert(diagnostics, lsp)
    end
  end
  if #diagnostics > 0 then
    return M.run_action(M.kinds.quickfix, bufnr, whole, vim.tbl_extend('keep', opts, {
      diagnostics = diagnostics, anchors = { whole.start } }))
  end
  M.run_action(M.kinds.fix, bufnr, whole, vim.tbl_extend('keep', opts, { anchors = { whole.start } }))
end

--- Lines describing the reply of `infill.workerInfo`.
function M.format_info(info)
  local precision = (type(info.precision) == 'string' and info.precision ~= '')
      and (' (' .. info.precision .. ')') or ''
  local out = { ('model %s on %s%s'):format(tostring(info.model), tostring(info.device), precision) }
  for _, key in ipairs({ 'versions', 'limits', 'batching', 'counters' }) do
    local v = info[key]
    if type(v) == 'table' then
      local parts = {}
      for k, x in vim.spairs(v) do
        table.insert(parts, ('%s=%s'):format(k, type(x) == 'table' and vim.inspect(x) or tostring(x)))
      end
      table.insert(out, key .. ': ' .. table.concat(parts, ', '))
    elseif v ~= nil and v ~= vim.NIL then
      table.insert(out, key .. ': ' .. tostring(v))
    end
  end
  return out
end

--- :InfillInfo: the worker's model, device, versions, limits and counters.
function M.info(on_done)
  local client = need_client(0)
  if not client then
    return
  end
  local params = { command = 'infill.workerInfo', arguments = {} }
  client:request('workspace/executeCommand', params, function(err, info)
    if err or type(info) ~= 'table' then
      notify('worker info: ' .. (err and err.message or 'no answer'), vim.log.levels.ERROR)
    else
      notify(table.concat(M.format_info(info), '\n'))
    end
    if on_done then
      on_done(err, info)
    end
  end, 0)
end

--- :InfillCancel: cancel this buffer's infill requests that are still running.
function M.cancel()
  local client = M.client(0)
  if not client then
    return
  end
  local bufnr = vim.api.nvim_get_current_buf()
  for id, req in pairs(client.requests or {}) do
    if req.bufnr == bufnr and req.type == 'pending' then
      client:cancel_request(id)
    end
  end
end

--- Changes settings at run time: merged into every infill client's settings and pushed
--- with workspace/didChangeConfiguration (and used by clients started later).
function M.set(settings)
  M.options = M.options or vim.deepcopy(M.defaults)
  M.options.settings = vim.tbl_extend('force', M.options.settings or {}, settings)
  vim.lsp.config(M.name, { settings = { infill = M.options.settings } })
  for _, client in ipairs(vim.lsp.get_clients({ name = M.name })) do
    client.settings = vim.tbl_extend('force', client.settings or {}, {
      infill = vim.tbl_extend('force', M.settings(client), settings),
    })
    client:notify('workspace/didChangeConfiguration', { settings = client.settings })
  end
end

-- setup -----------------------------------------------------------------------------------

local function set_keymaps(bufnr, keymaps)
  local actions = {
    fill = function() M.fill() end,
    docstring = function() M.docstring() end,
    fix = ':InfillFix<CR>',
    rewrite = ':InfillRewrite<CR>',
    info = function() M.info() end,
    cancel = function() M.cancel() end,
    accept = function(lhs)
      if vim.lsp.inline_completion and vim.lsp.inline_completion.get({ bufnr = bufnr }) then
        return ''
      end
      -- nothing to accept: the key does what it does unmapped (<Tab> inserts a tab), but an
      -- Alt key would leave insert mode (<M-l> is <Esc>l there)
      return lhs:match('^<[MmAa]%-') and '' or lhs
    end,
    -- the server offers up to `completionItems` completions (its fill, then runner-ups)
    next = function()
      if vim.lsp.inline_completion then
        vim.lsp.inline_completion.select({ bufnr = bufnr, count = 1 })
      end
    end,
    previous = function()
      if vim.lsp.inline_completion then
        vim.lsp.inline_completion.select({ bufnr = bufnr, count = -1 })
      end
    end,
  }
  local inline_keys = { accept = true, next = true, previous = true }
  for name, spec in pairs(M.default_keymaps) do
    local lhs = keymaps == true and spec.lhs or (type(keymaps) == 'table' and keymaps[name])
    if type(lhs) == 'string' and (not inline_keys[name] or vim.lsp.inline_completion) then
      local rhs = actions[name]
      if name == 'accept' then
        rhs = function()
          return actions.accept(lhs)
        end
      end
      vim.keymap.set(spec.modes, lhs, rhs, {
        buffer = bufnr, desc = spec.desc, silent = true, expr = name == 'accept' or nil,
      })
    end
  end
end

local function on_attach(bufnr, client)
  local opts = M.options or M.defaults
  if opts.inline_completion and vim.lsp.inline_completion
      and client:supports_method('textDocument/inlineCompletion') then
    vim.lsp.inline_completion.enable(true, { bufnr = bufnr })
  end
  if opts.keymaps then
    set_keymaps(bufnr, opts.keymaps)
  end
end

local function create_commands()
  local cmd = vim.api.nvim_create_user_command
  cmd('InfillFill', function() M.fill() end, { desc = 'Infill: fill the hole markers' })
  cmd('InfillDocstring', function() M.docstring() end,
    { desc = 'Infill: insert a docstring for the function or class at the cursor' })
  cmd('InfillFix', function(c) M.fix(c) end, { range = true,
    desc = 'Infill: fix the selection (no range: the diagnostics on the cursor line)' })
  cmd('InfillRewrite', function(c) M.rewrite(c) end, { range = true,
    desc = 'Infill: rewrite the selection' })
  cmd('InfillInfo', function() M.info() end, { desc = "Infill: the worker's model and device" })
  cmd('InfillCancel', function() M.cancel() end, { desc = "Infill: cancel this buffer's requests" })
end

--- Configures and enables the server. Safe to call again (the last options win).
---@param opts infill.Options?
function M.setup(opts)
  if not (vim.lsp.config and vim.lsp.enable) then
    return notify('needs Neovim 0.11 or newer (vim.lsp.config)', vim.log.levels.ERROR)
  end
  opts = vim.tbl_extend('force', vim.deepcopy(M.defaults), opts or {})
  M.options = opts
  local filetypes = { 'python' }
  for _, ft in ipairs(opts.filetypes or {}) do
    if not vim.tbl_contains(filetypes, ft) then
      table.insert(filetypes, ft)
    end
  end
  local config = vim.deepcopy(opts.lsp or {})
  config.cmd = opts.cmd
  config.filetypes = filetypes
  config.root_markers = config.root_markers or opts.root_markers
  config.init_options = { infill = opts.settings }
  config.settings = { infill = opts.settings }
  config.handlers = vim.tbl_extend('force', config.handlers or {}, {
    [live.METHOD] = function(...)
      return live.handle(...)
    end,
  })
  vim.lsp.config(M.name, config)
  vim.lsp.enable(M.name)

  local group = vim.api.nvim_create_augroup('infill', { clear = true })
  vim.api.nvim_create_autocmd('LspAttach', {
    group = group,
    callback = function(ev)
      local client = vim.lsp.get_client_by_id(ev.data.client_id)
      if client and client.name == M.name then
        on_attach(ev.buf, client)
      end
    end,
  })
  vim.api.nvim_create_autocmd('LspRequest', {
    group = group,
    callback = function(ev)
      local t = ev.data.request and ev.data.request.type
      if t == 'complete' or t == 'cancel' then
        live.finish(ev.data.client_id, ev.data.request_id)
      end
    end,
  })
  vim.api.nvim_create_autocmd('LspDetach', {
    group = group,
    callback = function(ev)
      live.clear_buffer(ev.buf)
    end,
  })
  vim.api.nvim_set_hl(0, 'InfillLive', { link = 'Comment', default = true })
  create_commands()
  -- buffers that are already attached (setup called late)
  for _, client in ipairs(vim.lsp.get_clients({ name = M.name })) do
    for bufnr in pairs(client.attached_buffers) do
      on_attach(bufnr, client)
    end
  end
end

return M
