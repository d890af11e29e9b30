-- The Neovim plugin (editors/nvim) in a real headless Neovim 0.12, against the language
-- server and a fake worker (tests/test_editors_nvim.py runs it):
--
--   nvim --headless --clean -u tests/nvim_plugin/test_plugin.lua
--
-- Environment: INFILL_PLUGIN (editors/nvim), INFILL_ROOT (the repository), INFILL_PYTHON,
-- INFILL_WORKER (the worker address), INFILL_DIR (a directory with the case files),
-- INFILL_OUT (the JSON report written at the end). The steps run in a coroutine that
-- yields to Neovim's main loop while it waits on a condition (typed keys, insert mode and
-- timers need the loop), each wait bounded by a timeout. Exits 0 after writing the report;
-- 1 when a step failed (report.error says which).

local env = vim.env
local report = { error = nil }
local TIMEOUT = 60000

vim.opt.rtp:prepend(env.INFILL_PLUGIN)
vim.g.mapleader = ' '

local function write_report()
  local fh = assert(io.open(env.INFILL_OUT, 'w'))
  fh:write(vim.json.encode(report))
  fh:close()
end

--- Waits (yielding to the main loop) until cond() returns a true value, and returns it.
local function wait(what, cond, timeout)
  local deadline = vim.uv.now() + (timeout or TIMEOUT)
  local me = assert(coroutine.running())
  while true do
    local ok, value = pcall(cond)
    if ok and value then
      return value
    end
    if vim.uv.now() > deadline then
      error('timed out waiting for ' .. what .. (ok and '' or (': ' .. tostring(value))), 0)
    end
    vim.defer_fn(function()
      coroutine.resume(me)
    end, 20)
    coroutine.yield()
  end
end

local function text(bufnr)
  return table.concat(vim.api.nvim_buf_get_lines(bufnr or 0, 0, -1, false), '\n') .. '\n'
end

local function open(name)
  vim.cmd.edit(vim.fn.fnameescape(env.INFILL_DIR .. '/' .. name))
  local bufnr = vim.api.nvim_get_current_buf()
  local client = wait('the server to attach to ' .. name, function()
    local c = require('infill').client(bufnr)
    return c and c.initialized and c
  end)
  return bufnr, client
end

local function changed(bufnr, before, what)
  wait(what .. ' to change the buffer', function()
    return text(bufnr) ~= before
  end)
  return text(bufnr)
end

local function run()
  local infill = require('infill')
  local live = require('infill.live')
  infill.setup({
    cmd = { env.INFILL_PYTHON, '-m', 'diffusion_infill.lsp.server' },
    -- checks off: the fake model's fills use names the buffers never define; no gate:
    -- the fake's runner-up is one a real model would be unsure of, and here the keymaps
    -- cycle to it (the gate is the server's, tested over stdio)
    settings = { workerAddress = env.INFILL_WORKER, progressDelay = 0, liveView = true,
                 checks = false, completionMinConfidence = 0 },
    keymaps = true,
    lsp = { cmd_cwd = env.INFILL_ROOT, cmd_env = { PYTHONPATH = env.INFILL_ROOT } },
  })

  -- record what the live view shows after each denoising step
  local seen = {}
  local handle = live.handle
  live.handle = function(err, params, ctx)
    handle(err, params, ctx)
    if params and params.uri then
      local bufnr = vim.uri_to_bufnr(params.uri)
      local shown = {}
      for _, m in ipairs(vim.api.nvim_buf_get_extmarks(bufnr, live.ns, 0, -1, { details = true })) do
        table.insert(shown, { row = m[2], col = m[3], text = m[4].virt_text[1][1] })
      end
      table.insert(seen, { operation = params.operation, step = params.step, shown = shown })
    end
  end
  local messages = {}
  vim.notify = function(msg, level)
    table.insert(messages, { msg = msg, level = level })
  end

  -- Fill holes (:InfillFill), with the live view on
  local bufnr, client = open('holes.py')
  report.encoding = client.offset_encoding
  local before = text(bufnr)
  vim.cmd('InfillFill')
  report.fill = changed(bufnr, before, ':InfillFill')
  report.fill_live = vim.tbl_filter(function(s) return s.operation == 'fill' end, seen)
  report.fill_live_after = #vim.api.nvim_buf_get_extmarks(bufnr, live.ns, 0, -1, {})

  -- Insert docstring (:InfillDocstring)
  bufnr = open('doc.py')
  vim.api.nvim_win_set_cursor(0, { 2, 4 })
  before = text(bufnr)
  vim.cmd('InfillDocstring')
  report.docstring = changed(bufnr, before, ':InfillDocstring')

  -- Rewrite selection (:'<,'>InfillRewrite on a charwise visual selection), with the
  -- live view turned off at run time (workspace/didChangeConfiguration)
  infill.set({ liveView = false })
  bufnr = open('rewrite.py')
  vim.cmd('normal! 0wwve\27') -- select old_value
  before = text(bufnr)
  vim.cmd("'<,'>InfillRewrite")
  report.rewrite = changed(bufnr, before, ":'<,'>InfillRewrite")
  report.rewrite_live = #vim.tbl_filter(function(s) return s.operation == 'rewrite' end, seen)

  -- Worker info (:InfillInfo)
  local n = #messages
  vim.cmd('InfillInfo')
  report.info = wait(':InfillInfo to report', function()
    for i = n + 1, #messages do
      if tostring(messages[i].msg):find('model ', 1, true) then
        return messages[i].msg
      end
    end
  end)

  -- Inline completion: insert mode at the end of `name = `, the ghost text appears
  -- (vim.lsp.inline_completion requests it on InsertEnter), and the plugin's keymap accepts
  -- it with vim.lsp.inline_completion.get().
  bufnr = open('complete.py')
  report.inline_enabled = vim.lsp.inline_completion.is_enabled({ bufnr = bufnr })
  local ghost = vim.api.nvim_get_namespaces()['nvim.lsp.inline_completion']
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  vim.api.nvim_feedkeys('A', 'n', false)
  wait('insert mode', function()
    return vim.api.nvim_get_mode().mode == 'i'
  end)
  local function shown()
    local marks = vim.api.nvim_buf_get_extmarks(bufnr, ghost, 0, -1, { details = true })
    return marks[1] and marks[1][4].virt_text[1][1]
  end
  report.ghost = wait('the inline completion to show', shown)
  -- the suggested keymaps <M-]> and <M-[> cycle through the server's items (surest first)
  vim.api.nvim_feedkeys(vim.keycode('<M-]>'), 'm', false)
  report.ghost_next = wait('the next completion to show', function()
    local g = shown()
    return g ~= report.ghost and g
  end)
  vim.api.nvim_feedkeys(vim.keycode('<M-[>'), 'm', false)
  report.ghost_previous = wait('the previous completion to show', function()
    local g = shown()
    return g == report.ghost and g
  end)
  -- the suggested keymap <M-l> (keymaps = true) calls vim.lsp.inline_completion.get()
  vim.api.nvim_feedkeys(vim.keycode('<M-l>'), 'm', false)
  report.completion = wait('the completion to be inserted', function()
    local t = text(bufnr)
    return t ~= 'name = \n' and t
  end)
  vim.api.nvim_feedkeys(vim.keycode('<Esc>'), 'n', false)
  wait('normal mode', function()
    return vim.api.nvim_get_mode().mode == 'n'
  end)

  -- keymaps (keymaps = true)
  report.keymaps = {
    fill = not vim.tbl_isempty(vim.fn.maparg('<leader>if', 'n', false, true)),
    accept = not vim.tbl_isempty(vim.fn.maparg('<M-l>', 'i', false, true)),
    next = not vim.tbl_isempty(vim.fn.maparg('<M-]>', 'i', false, true)),
    previous = not vim.tbl_isempty(vim.fn.maparg('<M-[>', 'i', false, true)),
  }

  -- :checkhealth infill
  vim.cmd('checkhealth infill')
  report.health = text(vim.api.nvim_get_current_buf())
end

vim.api.nvim_create_autocmd('VimEnter', {
  once = true,
  nested = true,
  callback = function()
    local co = coroutine.create(function()
      local ok, err = xpcall(run, debug.traceback)
      if not ok then
        report.error = tostring(err) .. ' (LSP log: ' .. vim.lsp.log.get_filename() .. ')'
      end
      write_report()
      vim.cmd(ok and 'qa!' or 'cq!')
    end)
    local ok, err = coroutine.resume(co)
    if not ok then
      report.error = tostring(err)
      write_report()
      vim.cmd('cq!')
    end
  end,
})
