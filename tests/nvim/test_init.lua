-- A real Neovim (0.12, headless) as the language server's client.
--
--   nvim --headless --clean -u tests/nvim/test_init.lua
--
-- Environment: INFILL_ROOT (the repository), INFILL_PYTHON (the interpreter),
-- INFILL_WORKER (the worker address for the server's settings), INFILL_OUT (a JSON
-- report), INFILL_CASES (JSON: [{file, line, col, title}]). For each case: open the
-- file, let the server attach, put the cursor at (line, col) (1-based line, 0-based
-- byte column), run the code action whose title contains `title` through Neovim's own
-- vim.lsp.buf.code_action (which resolves it and applies the edit), wait for the buffer
-- to change, and record the buffer's text. Exits 0 after writing the report; 1 on error.

local env = vim.env
local report = { cases = {}, encoding = nil, error = nil }

local function write_report()
  local fh = assert(io.open(env.INFILL_OUT, 'w'))
  fh:write(vim.json.encode(report))
  fh:close()
end

local function run()
  local cases = vim.json.decode(env.INFILL_CASES)
  vim.lsp.config('infill', {
    cmd = { env.INFILL_PYTHON, '-m', 'diffusion_infill.lsp.server' },
    cmd_cwd = env.INFILL_ROOT,
    cmd_env = { PYTHONPATH = env.INFILL_ROOT },
    filetypes = { 'python' },
    root_dir = env.INFILL_ROOT,
    -- checks off: the fake model's fills use names the buffers never define
    init_options = { workerAddress = env.INFILL_WORKER, progressDelay = 0, checks = false },
  })
  vim.lsp.enable('infill')

  for _, case in ipairs(cases) do
    vim.cmd.edit(vim.fn.fnameescape(case.file))
    local bufnr = vim.api.nvim_get_current_buf()
    local client
    local attached = vim.wait(60000, function()
      client = vim.lsp.get_clients({ bufnr = bufnr, name = 'infill' })[1]
      return client ~= nil and client.initialized
    end, 50)
    assert(attached, 'the server did not attach to ' .. case.file)
    report.encoding = client.offset_encoding

    local before = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), '\n')
    vim.api.nvim_win_set_cursor(0, { case.line, case.col })
    vim.lsp.buf.code_action({
      apply = true,
      filter = function(action)
        return action.title:find(case.title, 1, true) ~= nil
      end,
    })
    local changed = vim.wait(60000, function()
      return table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), '\n') ~= before
    end, 50)
    assert(changed, 'the action "' .. case.title .. '" did not change ' .. case.file)
    table.insert(report.cases, {
      file = case.file,
      text = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), '\n') .. '\n',
    })
  end
end

-- After startup: filetype detection (which starts the server for Python buffers) is
-- switched on only once the init file has run. `nested`: the :edit inside the callback
-- must fire its own autocommands (filetype detection, LSP attach).
vim.api.nvim_create_autocmd('VimEnter', {
  once = true,
  nested = true,
  callback = function()
    local ok, err = pcall(run)
    if not ok then
      report.error = tostring(err) .. ' (LSP log: ' .. vim.lsp.log.get_filename() .. ')'
    end
    write_report()
    vim.cmd(ok and 'qa!' or 'cq!')
  end,
})
