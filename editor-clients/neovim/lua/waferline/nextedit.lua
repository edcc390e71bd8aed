-- Next-edit suggestions: once typing stops (in insert or normal mode), ask the server for the edit that follows
-- (`textDocument/copilotInlineEdit`, docs/next-edit.md), anywhere in the buffer, and preview it with extmarks: the
-- old text struck through, the new text beside it (further lines below), an arrow in the sign column and, when the
-- edit is on another line, a hint at the cursor. A key jumps to it, a key accepts it (the edit applied, then the
-- item's command run so that the server can offer the next edit of a chain), a key dismisses it. Every shown edit
-- ends with one `waferline/didEndInlineEdit`: accepted, rejected (dismissed), ignored (the cursor went to another
-- line, the text changed, the buffer was left) or typedThrough (the user made the same edit).
local server = require('waferline.server')

local M = {}

M.ns = vim.api.nvim_create_namespace('waferline.nextedit')
M.METHOD = 'textDocument/copilotInlineEdit'

---@class waferline.NextEdit
---@field client_id integer
---@field id string
---@field text string
---@field command table?
---@field start_row integer 0-based
---@field start_col integer bytes
---@field end_row integer
---@field end_col integer
---@field tick integer changedtick it was shown for
---@field shown_row integer the cursor's row when shown
---@field expected string[] the buffer's lines with the edit applied (to tell typing it through)

---@type table<integer, { timer: uv.uv_timer_t?, pending: table<integer, integer>, edit: waferline.NextEdit? }>
local states = {}

local function state(bufnr)
  states[bufnr] = states[bufnr] or { pending = {} }
  return states[bufnr]
end

local function set_highlights()
  local delete = vim.api.nvim_get_hl(0, { name = 'DiffDelete', link = false })
  vim.api.nvim_set_hl(0, 'WaferlineNextEditDelete', { default = true, fg = delete.fg, bg = delete.bg, strikethrough = true })
  vim.api.nvim_set_hl(0, 'WaferlineNextEditInsert', { default = true, link = 'DiffAdd' })
  vim.api.nvim_set_hl(0, 'WaferlineNextEditSign', { default = true, link = 'DiagnosticSignHint' })
  vim.api.nvim_set_hl(0, 'WaferlineNextEditHint', { default = true, link = 'Comment' })
end

--- Whether a client answers next-edit requests (its initialize result says so).
function M.supported(client)
  return vim.tbl_get(client, 'server_capabilities', 'experimental', 'inlineEditProvider') == true
end

local stop_timer = server.stop_timer

local function cancel_pending(st)
  st.pending = server.cancel_all(st.pending)
end

local function buf_of(bufnr)
  return (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
end

--- The edit shown in the buffer, or nil.
---@return waferline.NextEdit?
function M.current(bufnr)
  local st = states[buf_of(bufnr)]
  return st and st.edit or nil
end

--- Stop showing the edit and tell the server why (once per shown edit).
---@param reason 'accepted'|'rejected'|'ignored'|'typedThrough'
function M.finish(bufnr, reason)
  bufnr = buf_of(bufnr)
  local st = states[bufnr]
  local edit = st and st.edit
  if not edit then
    return
  end
  st.edit = nil
  if vim.api.nvim_buf_is_valid(bufnr) then
    vim.api.nvim_buf_clear_namespace(bufnr, M.ns, 0, -1)
  end
  local client = vim.lsp.get_client_by_id(edit.client_id)
  if client then
    server.notify(client, 'waferline/didEndInlineEdit', { id = edit.id, reason = reason })
  end
end

--- Hide the edit as the user's choice (the dismiss key). False when none is shown.
function M.dismiss(bufnr)
  if not M.current(bufnr) then
    return false
  end
  M.finish(bufnr, 'rejected')
  return true
end

local function with_edit(lines, e)
  local out = vim.list_slice(lines, 1, e.start_row)
  local new = vim.split(e.text, '\n', { plain = true })
  new[1] = lines[e.start_row + 1]:sub(1, e.start_col) .. new[1]
  new[#new] = new[#new] .. lines[e.end_row + 1]:sub(e.end_col + 1)
  vim.list_extend(out, new)
  return vim.list_extend(out, vim.list_slice(lines, e.end_row + 2))
end

local function draw(bufnr, e, keys)
  vim.api.nvim_buf_clear_namespace(bufnr, M.ns, 0, -1)
  local new = vim.split(e.text, '\n', { plain = true })
  if e.start_row ~= e.end_row or e.start_col ~= e.end_col then
    vim.api.nvim_buf_set_extmark(bufnr, M.ns, e.start_row, e.start_col, {
      end_row = e.end_row, end_col = e.end_col, hl_group = 'WaferlineNextEditDelete', hl_mode = 'combine',
    })
  end
  local virt_lines = {}
  for i = 2, #new do
    virt_lines[#virt_lines + 1] = { { new[i], 'WaferlineNextEditInsert' } }
  end
  vim.api.nvim_buf_set_extmark(bufnr, M.ns, e.end_row, e.end_col, {
    virt_text = { { new[1] ~= '' and new[1] or (#new == 1 and '⌫' or ''), 'WaferlineNextEditInsert' } },
    virt_text_pos = 'inline',
    virt_lines = #virt_lines > 0 and virt_lines or nil,
  })
  vim.api.nvim_buf_set_extmark(bufnr, M.ns, e.start_row, 0, { sign_text = '→', sign_hl_group = 'WaferlineNextEditSign' })
  if e.shown_row < e.start_row or e.shown_row > e.end_row then
    local how = keys.next_edit_jump and (' (%s jump, %s accept)'):format(keys.next_edit_jump, keys.next_edit_accept or '-') or ''
    vim.api.nvim_buf_set_extmark(bufnr, M.ns, e.shown_row, 0, {
      virt_text = { { ('  next edit: line %d%s'):format(e.start_row + 1, how), 'WaferlineNextEditHint' } },
      virt_text_pos = 'eol',
    })
  end
end

--- The first edit of an answer, in buffer coordinates, or nil (none, stale, out of range or malformed).
local function to_edit(bufnr, client, result, version)
  for _, item in ipairs(type(result) == 'table' and result.edits or {}) do
    local r, doc = item.range, item.textDocument
    if type(item.id) == 'string' and type(item.text) == 'string' and type(r) == 'table' and type(doc) == 'table' then
      if doc.uri ~= vim.uri_from_bufnr(bufnr) or doc.version ~= version then
        return nil -- made for other text: never shown, never applied
      end
      local count = vim.api.nvim_buf_line_count(bufnr)
      if r.start.line >= count or r['end'].line >= count or r.start.line > r['end'].line then
        return nil
      end
      local enc = client.offset_encoding
      return {
        client_id = client.id, id = item.id, text = item.text, command = item.command,
        start_row = r.start.line, start_col = vim.lsp.util._get_line_byte_from_position(bufnr, r.start, enc),
        end_row = r['end'].line, end_col = vim.lsp.util._get_line_byte_from_position(bufnr, r['end'], enc),
      }
    end
  end
  return nil
end

--- Ask the servers that support it for the next edit at the cursor, cancelling the request in flight.
---@param bufnr integer
---@param opts waferline.Config
function M.request(bufnr, opts)
  local st = state(bufnr)
  cancel_pending(st)
  if vim.api.nvim_get_current_buf() ~= bufnr then
    return
  end
  local tick = vim.api.nvim_buf_get_changedtick(bufnr)
  local version = vim.lsp.util.buf_versions[bufnr] or tick
  for _, client in ipairs(server.clients(bufnr)) do
    if M.supported(client) then
      local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
      params.textDocument.version = version
      local ok, request_id
      ok, request_id = server.request(client, M.METHOD, params, function(err, result)
        if st.pending[client.id] == request_id then
          st.pending[client.id] = nil
        end
        if err or not vim.api.nvim_buf_is_valid(bufnr) or vim.api.nvim_buf_get_changedtick(bufnr) ~= tick then
          return -- an error, or the text changed while the server thought: the answer is for another text
        end
        if vim.api.nvim_get_current_buf() ~= bufnr or st.edit then
          return
        end
        local e = to_edit(bufnr, client, result, version)
        if not e then
          return
        end
        e.tick = tick
        e.shown_row = vim.api.nvim_win_get_cursor(0)[1] - 1
        e.expected = with_edit(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), e)
        st.edit = e
        draw(bufnr, e, opts.keymaps)
        server.notify(client, 'textDocument/didShowInlineEdit', { item = { id = e.id } })
      end, bufnr)
      if ok and request_id then
        st.pending[client.id] = request_id
      end
    end
  end
end

--- Debounced request after a change.
function M.schedule(bufnr, opts, delay_ms)
  local st = state(bufnr)
  stop_timer(st)
  st.timer = vim.defer_fn(function()
    st.timer = nil
    if vim.api.nvim_buf_is_valid(bufnr) and vim.api.nvim_get_mode().mode:match('^[ni]') then
      M.request(bufnr, opts)
    end
  end, delay_ms)
end

--- The jump key: move the cursor to the shown edit; when it is already on the edit's lines, accept instead.
--- False when no edit is shown (so that a keymap can fall through).
function M.jump(bufnr)
  bufnr = buf_of(bufnr)
  local e = M.current(bufnr)
  if not e then
    return false
  end
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  if row >= e.start_row and row <= e.end_row then
    return M.accept(bufnr)
  end
  vim.schedule(function()
    if M.current(bufnr) == e then
      e.shown_row = e.start_row -- at the edit now: moving within it keeps it
      vim.api.nvim_win_set_cursor(0, { e.start_row + 1, e.start_col })
      vim.api.nvim_buf_clear_namespace(bufnr, M.ns, 0, -1)
      draw(bufnr, e, require('waferline.config').options.keymaps)
    end
  end)
  return true
end

--- Apply the shown edit, run its command, and ask for the next one. False when none is shown.
function M.accept(bufnr)
  bufnr = buf_of(bufnr)
  local st = states[bufnr]
  local e = st and st.edit
  if not e then
    return false
  end
  if vim.api.nvim_buf_get_changedtick(bufnr) ~= e.tick then
    M.finish(bufnr, 'ignored')
    return false
  end
  st.edit = nil
  vim.api.nvim_buf_clear_namespace(bufnr, M.ns, 0, -1)
  vim.schedule(function() -- deferred: accept() may run from an <expr> mapping, where the text may not change
    local lines = vim.split(e.text, '\n', { plain = true })
    vim.api.nvim_buf_set_text(bufnr, e.start_row, e.start_col, e.end_row, e.end_col, lines)
    local last_row = e.start_row + #lines - 1
    local last_col = (#lines == 1 and e.start_col or 0) + #lines[#lines]
    if vim.api.nvim_get_mode().mode:match('^n') and last_col > 0 then
      last_col = last_col - 1 -- normal mode: on the last inserted character
    end
    vim.api.nvim_win_set_cursor(0, { last_row + 1, last_col })
    local client = vim.lsp.get_client_by_id(e.client_id)
    if client then
      server.notify(client, 'waferline/didEndInlineEdit', { id = e.id, reason = 'accepted' })
      if e.command then
        server.request(client, 'workspace/executeCommand', { command = e.command.command,
          arguments = e.command.arguments }, function() end, bufnr) -- fmt: skip
      end
    end
    M.schedule(bufnr, require('waferline.config').options, 0) -- the next edit of a chain, if the server has one
  end)
  return true
end

--- Start next-edit suggestions in a buffer (called when waferline attaches to it).
---@param bufnr integer
---@param opts waferline.Config
function M.attach(bufnr, opts)
  set_highlights()
  local group = vim.api.nvim_create_augroup('waferline.nextedit.' .. bufnr, { clear = true })
  vim.api.nvim_create_autocmd({ 'TextChanged', 'TextChangedI' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      local e = M.current(bufnr)
      if e and vim.api.nvim_buf_get_changedtick(bufnr) ~= e.tick then
        local same = vim.deep_equal(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), e.expected)
        M.finish(bufnr, same and 'typedThrough' or 'ignored')
      end
      if opts.next_edit.enabled and require('waferline').enabled() then
        M.schedule(bufnr, opts, opts.next_edit.debounce_ms)
      end
    end,
  })
  vim.api.nvim_create_autocmd({ 'CursorMoved', 'CursorMovedI' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      local e = M.current(bufnr)
      if e and vim.api.nvim_buf_get_changedtick(bufnr) == e.tick then
        local row = vim.api.nvim_win_get_cursor(0)[1] - 1
        if row ~= e.shown_row and (row < e.start_row or row > e.end_row) then
          M.finish(bufnr, 'ignored')
        end
      end
    end,
  })
  vim.api.nvim_create_autocmd('BufLeave', {
    group = group,
    buffer = bufnr,
    callback = function()
      local st = state(bufnr)
      stop_timer(st)
      cancel_pending(st)
      M.finish(bufnr, 'ignored')
    end,
  })
end

--- Stop next-edit suggestions in a buffer.
function M.detach(bufnr)
  pcall(vim.api.nvim_del_augroup_by_name, 'waferline.nextedit.' .. bufnr)
  local st = states[bufnr]
  if st then
    stop_timer(st)
    cancel_pending(st)
    M.finish(bufnr, 'ignored')
  end
  states[bufnr] = nil
end

return M
