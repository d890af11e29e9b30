--- The live denoising view: while a fill runs with the server setting `liveView` on, the
--- server sends `infill/denoiseStep` after every step (docs/LSP.md) with each span's text
--- (`░` a slot still masked, `∅` a dropped one, not shown). They are shown as virtual text:
---
--- * at each span's own position when the notification carries one (`range`), or when the
---   request was started by a command that knows where its spans are (Fill holes: one
---   per hole marker);
--- * otherwise all spans together at the request's anchor (the selection, the cursor).
---
--- The text goes when the request ends (its response, or its cancellation: the LspRequest
--- event) and is never shown for an outdated buffer version.

local M = {}

M.METHOD = 'infill/denoiseStep'
M.ns = vim.api.nvim_create_namespace('infill.live')

---@class infill.live.Request
---@field bufnr integer
---@field anchors? integer[][] {row, col} per span (0-based, bytes)
---@field ids integer[] extmarks shown

local requests = {} ---@type table<string, infill.live.Request>
local finished = {} ---@type table<string, boolean> the last few requests that ended
local finished_order = {} ---@type string[]

local function key(client_id, request_id)
  return tostring(client_id) .. ':' .. tostring(request_id)
end

local function clear(req)
  if vim.api.nvim_buf_is_valid(req.bufnr) then
    for _, id in ipairs(req.ids) do
      vim.api.nvim_buf_del_extmark(req.bufnr, M.ns, id)
    end
  end
  req.ids = {}
end

--- Registers where the spans of a request will be (called by the command that sent it).
function M.track(client_id, request_id, bufnr, anchors)
  local k = key(client_id, request_id)
  if not finished[k] then
    requests[k] = requests[k] or { bufnr = bufnr, ids = {} }
    requests[k].anchors = anchors
  end
end

--- The request ended: its virtual text goes.
function M.finish(client_id, request_id)
  local k = key(client_id, request_id)
  local req = requests[k]
  if req then
    clear(req)
    requests[k] = nil
  end
  if not finished[k] then
    finished[k] = true
    table.insert(finished_order, k)
    if #finished_order > 64 then
      finished[table.remove(finished_order, 1)] = nil
    end
  end
end

--- Clears every live view of a buffer.
function M.clear_buffer(bufnr)
  for k, req in pairs(requests) do
    if req.bufnr == bufnr then
      clear(req)
      requests[k] = nil
    end
  end
end

local NULL = '∅' -- a dropped slot: not shown

local function place(bufnr, anchor, text, pos)
  text = text:gsub(NULL, '')
  local last = vim.api.nvim_buf_line_count(bufnr) - 1
  local row = math.max(0, math.min(anchor[1], last))
  local line = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ''
  local col = math.max(0, math.min(anchor[2], #line))
  local lines = vim.split(text, '\n', { plain = true })
  local virt_lines = {}
  for i = 2, #lines do
    table.insert(virt_lines, { { lines[i], 'InfillLive' } })
  end
  return vim.api.nvim_buf_set_extmark(bufnr, M.ns, row, col, {
    virt_text = { { lines[1], 'InfillLive' } },
    virt_text_pos = pos,
    virt_lines = #virt_lines > 0 and virt_lines or nil,
    hl_mode = 'combine',
  })
end

local function span_anchor(bufnr, span, client)
  local r = span.range
  if type(r) ~= 'table' or type(r.start) ~= 'table' then
    return nil
  end
  local line = vim.api.nvim_buf_get_lines(bufnr, r.start.line, r.start.line + 1, false)[1]
  if not line then
    return nil
  end
  local ok, col = pcall(vim.str_byteindex, line, client.offset_encoding, r.start.character, false)
  return ok and { r.start.line, col } or nil
end

--- Draws one step: the spans' texts at their anchors.
function M.render(req, spans, client)
  clear(req)
  local bufnr = req.bufnr
  local anchors, each = {}, #spans > 0
  for i, span in ipairs(spans) do
    anchors[i] = span_anchor(bufnr, span, client) or (req.anchors and req.anchors[i])
    each = each and anchors[i] ~= nil
  end
  if each then
    for i, span in ipairs(spans) do
      table.insert(req.ids, place(bufnr, anchors[i], span.text or '', 'inline'))
    end
    return
  end
  local texts = {}
  for _, span in ipairs(spans) do
    table.insert(texts, span.text or '')
  end
  local anchor = (req.anchors and req.anchors[1]) or { 0, 0 }
  table.insert(req.ids, place(bufnr, anchor, ' ' .. table.concat(texts, ' │ '), 'eol'))
end

local function loaded_buffer(uri)
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(bufnr) and vim.uri_from_bufnr(bufnr) == uri then
      return bufnr
    end
  end
end

--- The `infill/denoiseStep` handler.
function M.handle(err, params, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if err or type(params) ~= 'table' or not client then
    return
  end
  local settings = client.settings and client.settings.infill or {}
  if settings.liveView ~= true then
    return
  end
  local k = key(ctx.client_id, params.requestId)
  if finished[k] then
    return
  end
  local bufnr = loaded_buffer(params.uri)
  if not bufnr or vim.lsp.util.buf_versions[bufnr] ~= params.version then
    return -- the buffer changed since: the result will be dropped too
  end
  local req = requests[k]
  if not req then -- a request the plugin did not send (inline completion, vim.lsp.buf.*)
    local win = vim.fn.bufwinid(bufnr)
    local cur = win ~= -1 and vim.api.nvim_win_get_cursor(win) or { 1, 0 }
    req = { bufnr = bufnr, ids = {}, anchors = { { cur[1] - 1, cur[2] } } }
    requests[k] = req
  end
  M.render(req, params.spans or {}, client)
end

return M
