--- :checkhealth infill

local M = {}

local function run(cmd, cfg)
  local ok, proc = pcall(vim.system, cmd, { text = true, cwd = cfg.cmd_cwd, env = cfg.cmd_env })
  if not ok then
    return nil, tostring(proc)
  end
  local res = proc:wait(30000)
  if res.code ~= 0 then
    local why = vim.trim((res.stderr or '') .. (res.stdout or ''))
    return nil, why ~= '' and why or ('exit code ' .. tostring(res.code))
  end
  return vim.trim(res.stdout or ''), nil
end

local function is_python(path)
  return vim.fs.basename(path):match('^python[%d.]*$') ~= nil
end

--- The Python that runs the server: cmd[1] when it is one, else the interpreter on the
--- `#!` line of the `infill-lsp` script, else python3.
local function python_of(cmd, exe)
  if is_python(cmd[1]) then
    return cmd[1]
  end
  local fh = exe ~= '' and io.open(exe, 'r')
  if fh then
    local first = fh:read('*l') or ''
    fh:close()
    local interp = first:match('^#!%s*(%S+)')
    if interp and is_python(interp) then
      return interp
    end
  end
  return 'python3'
end

function M.check()
  local h = vim.health
  h.start('infill: Neovim')
  local v = vim.version()
  local version = ('%d.%d.%d'):format(v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.11') == 1 then
    h.ok('Neovim ' .. version .. ' (0.11+: vim.lsp.config / vim.lsp.enable)')
  else
    h.error('Neovim ' .. version .. ' is too old', { 'infill needs Neovim 0.11 or newer' })
  end
  if vim.lsp.inline_completion then
    h.ok('vim.lsp.inline_completion is available: completions show as ghost text')
  else
    h.info('no vim.lsp.inline_completion (Neovim 0.12+): completions come through '
      .. "the completion menu (omnifunc, 'i_CTRL-X_CTRL-O')")
  end

  h.start('infill: server')
  local infill = require('infill')
  local opts = infill.options
  if not opts then
    h.warn('setup() was not called', { "call require('infill').setup({...}) in your init.lua" })
    opts = infill.defaults
  else
    h.ok('setup() called')
  end
  local cfg = (vim.lsp.config and vim.lsp.config[infill.name]) or {}
  local cmd = type(cfg.cmd) == 'table' and cfg.cmd or opts.cmd
  if type(cmd) ~= 'table' or not cmd[1] then
    h.error('the server command is not a list: ' .. vim.inspect(cmd))
    return
  end
  local exe = vim.fn.exepath(cmd[1])
  if exe == '' then
    h.error(('%s: not found on PATH'):format(cmd[1]), {
      'pip install the project (it installs the `infill-lsp` script), or',
      "set cmd = { '/path/to/python', '-m', 'diffusion_infill.lsp.server' } in setup()",
    })
  else
    h.ok(('%s found: %s'):format(cmd[1], exe))
    local out, err = run(vim.list_extend(vim.deepcopy(cmd), { '--version' }), cfg)
    if out then
      h.ok(('`%s --version`: %s'):format(table.concat(cmd, ' '), out))
    else
      h.error(('`%s --version` failed: %s'):format(table.concat(cmd, ' '), err))
    end
  end
  local python = opts.python or python_of(cmd, exe)
  if vim.fn.executable(python) == 1 then
    local out, err = run({ python, '-c', 'import diffusion_infill.lsp.server, diffusion_infill.infill, sys; print(sys.version.split()[0])' }, cfg)
    if out then
      h.ok(('Python %s (%s) imports diffusion_infill.lsp.server and diffusion_infill.infill'):format(out, python))
    else
      h.error(('%s cannot import the server: %s'):format(python, err),
        { 'install the project into that interpreter (pip install -e .)' })
    end
  else
    h.warn(('Python interpreter %s not found'):format(python))
  end
  local settings = opts.settings or {}
  local address = settings.workerAddress
  if type(address) == 'string' and address:match('^unix:') then
    local path = address:sub(6)
    if vim.uv.fs_stat(path) then
      h.ok('worker socket exists: ' .. path)
    else
      h.warn('worker socket not found: ' .. path, { 'start the worker (infill-worker --socket PATH)' })
    end
  elseif address then
    h.info('worker address: ' .. tostring(address))
  else
    h.info('no workerAddress: the server spawns its own worker'
      .. (settings.modelDir and (' (modelDir ' .. settings.modelDir .. ')') or ' (the shipped model)'))
  end
  h.info('live view: ' .. (settings.liveView and 'on' or 'off (settings.liveView)'))

  -- Not "this buffer": :checkhealth runs in its own buffer.
  h.start('infill: clients')
  local clients = vim.lsp.get_clients({ name = infill.name })
  if #clients == 0 then
    h.info('no infill server is running: it starts when a '
      .. table.concat(cfg.filetypes or { 'python' }, '/') .. ' buffer opens')
  end
  for _, c in ipairs(clients) do
    local names = {}
    for bufnr in pairs(c.attached_buffers) do
      table.insert(names, vim.fn.fnamemodify(vim.api.nvim_buf_get_name(bufnr), ':~:.'))
    end
    table.sort(names)
    local where = #names > 0 and ('attached to ' .. table.concat(names, ', ')) or 'attached to no buffer'
    local state = c:is_stopped() and 'stopped' or (c.initialized and 'running' or 'starting')
    local report = state == 'running' and h.ok or h.warn
    report(('client %d %s (%s positions, root %s): %s'):format(
      c.id, state, tostring(c.offset_encoding), tostring(c.root_dir), where))
  end
end

return M
