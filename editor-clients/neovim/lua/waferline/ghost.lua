-- Ghost text for Neovim before 0.12 (which has no vim.lsp.inline_completion): ask the server for inline
-- completions after a pause in typing, cancel the request a newer keystroke makes stale, draw the first suggestion
-- with extmarks, and insert exactly what was drawn when the accept key is pressed.
local server = require('waferline.server')

local M = {}

M.ns = vim.api.nvim_create_namespace('waferline.ghost')

---@class waferline.GhostState
---@field timer uv.uv_timer_t?
---@field pending table<integer, integer> client id -> request id in flight
---@field item table? { client_id, text, start_row, start_col, end_row, end_col, command } (0-based, bytes)
---@field tick integer? changedtick the shown item was computed for

---@type table<integer, waferline.GhostState>
local states = {}

local function state(bufnr)
  states[bufnr] = states[bufnr] or { pending = {} }
  return states[bufnr]
end

local stop_timer = server.stop_timer

--- Cancel every request in flight for the buffer: a newer keystroke makes their answers useless.
local function cancel_pending(bufnr)
  local st = state(bufnr)
  st.pending = server.cancel_all(st.pending)
end

--- Hide the ghost text and forget the suggestion.
---@param bufnr integer?
function M.clear(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  if not vim.api.nvim_buf_is_valid(bufnr) then
    return
  end
  vim.api.nvim_buf_clear_namespace(bufnr, M.ns, 0, -1)
  state(bufnr).item = nil
end

--- Byte column of an LSP position on a buffer line.
local function byte_col(bufnr, position, encoding)
  return vim.lsp.util._get_line_byte_from_position(bufnr, position, encoding)
end

--- Draw `item` at the cursor: what the suggestion adds after what is already typed on the line goes inline after
--- the cursor, further lines go below as virtual lines.
local function draw(bufnr, item)
  vim.api.nvim_buf_clear_namespace(bufnr, M.ns, 0, -1)
  local lines = vim.split(item.text, '\n', { plain = true })
  -- The text replaces [start, end); what lies between start and the cursor is already typed: skip it.
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  row = row - 1
  local first = lines[1]
  if row == item.start_row and col >= item.start_col then
    local typed = vim.api.nvim_buf_get_text(bufnr, row, item.start_col, row, col, {})[1] or ''
    if first:sub(1, #typed) ~= typed then
      return false -- the suggestion no longer agrees with the line
    end
    first = first:sub(#typed + 1)
  end
  local virt_lines = {}
  for i = 2, #lines do
    virt_lines[#virt_lines + 1] = { { lines[i], 'ComplHint' } }
  end
  vim.api.nvim_buf_set_extmark(bufnr, M.ns, row, col, {
    virt_text = { { first, 'ComplHint' } },
    virt_text_pos = 'inline',
    virt_lines = #virt_lines > 0 and virt_lines or nil,
    hl_mode = 'combine',
  })
  return true
end

--- Turn the first item of an inlineCompletion answer into a suggestion in buffer coordinates.
local function to_item(bufnr, client, result)
  local items = result and (result.items or result) or {}
  local first = items[1]
  if not first then
    return nil
  end
  local text = first.insertText
  if type(text) == 'table' then
    text = text.value -- a snippet: shown and inserted as its plain text
  end
  if type(text) ~= 'string' or text == '' then
    return nil
  end
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  local item = {
    client_id = client.id,
    text = text,
    start_row = row - 1,
    start_col = col,
    end_row = row - 1,
    end_col = col,
    command = first.command,
  }
  if first.range then
    local enc = client.offset_encoding
    item.start_row = first.range.start.line
    item.start_col = byte_col(bufnr, first.range.start, enc)
    item.end_row = first.range['end'].line
    item.end_col = byte_col(bufnr, first.range['end'], enc)
  end
  return item
end

--- Ask every attached waferline client for a suggestion at the cursor, cancelling the previous request.
--- `invoked`: the user asked (triggerKind 1), so the server may show a less confident suggestion.
---@param bufnr integer
---@param invoked boolean?
function M.request(bufnr, invoked)
  cancel_pending(bufnr)
  local st = state(bufnr)
  local tick = vim.api.nvim_buf_get_changedtick(bufnr)
  for _, client in ipairs(server.clients(bufnr)) do
    local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
    params.context = { triggerKind = invoked and 1 or 2 } -- Invoked or Automatic
    local ok, request_id
    ok, request_id = server.request(client, 'textDocument/inlineCompletion', params, function(err, result)
      if st.pending[client.id] == request_id then
        st.pending[client.id] = nil
      end
      if err or not vim.api.nvim_buf_is_valid(bufnr) then
        return
      end
      -- Drop answers that arrive after the buffer changed or insert mode ended.
      if vim.api.nvim_buf_get_changedtick(bufnr) ~= tick or not vim.api.nvim_get_mode().mode:match('^i') then
        return
      end
      if vim.api.nvim_get_current_buf() ~= bufnr then
        return
      end
      local item = to_item(bufnr, client, result)
      if item and draw(bufnr, item) then
        st.item = item
        st.tick = tick
      end
    end, bufnr)
    if ok and request_id then
      st.pending[client.id] = request_id
    end
  end
end

--- Debounced request after a keystroke; the ghost text on screen disappears at once (it is stale).
---@param bufnr integer
---@param delay_ms integer
function M.schedule(bufnr, delay_ms)
  local st = state(bufnr)
  M.clear(bufnr)
  stop_timer(st)
  st.timer = vim.defer_fn(function()
    st.timer = nil
    if vim.api.nvim_buf_is_valid(bufnr) and vim.api.nvim_get_mode().mode:match('^i') then
      M.request(bufnr)
    end
  end, delay_ms)
end

--- Whether a suggestion is shown in the buffer.
function M.visible(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local st = states[bufnr]
  return st ~= nil and st.item ~= nil and st.tick == vim.api.nvim_buf_get_changedtick(bufnr)
end

--- The suggestion on screen (see waferline.GhostState's item), or nil.
function M.item(bufnr)
  local st = states[(bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr]
  return st and st.item or nil
end

--- Insert the suggestion on screen. Returns false when there is none (so a keymap can fall through).
---@param bufnr integer?
---@return boolean
function M.accept(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  if not M.visible(bufnr) then
    return false
  end
  local item = states[bufnr].item
  local partial = require('waferline.partial')
  local kept = partial.rest_of(bufnr, item.text, item.start_row, item.start_col) or item.text
  M.clear(bufnr)
  -- Deferred so that accept() can be called from an <expr> mapping, where the text may not be changed.
  vim.schedule(function()
    local lines = vim.split(item.text, '\n', { plain = true })
    vim.api.nvim_buf_set_text(bufnr, item.start_row, item.start_col, item.end_row, item.end_col, lines)
    local last_row = item.start_row + #lines - 1
    local last_col = (#lines == 1 and item.start_col or 0) + #lines[#lines]
    vim.api.nvim_win_set_cursor(0, { last_row + 1, last_col })
    local client = vim.lsp.get_client_by_id(item.client_id)
    partial.report(client, bufnr, 'full', kept)
    if item.command and client then
      server.request(client, 'workspace/executeCommand', item.command, function() end, bufnr)
    end
  end)
  return true
end

--- Start drawing suggestions in a buffer (called when waferline attaches to it).
---@param bufnr integer
---@param opts waferline.Config
function M.attach(bufnr, opts)
  local group = vim.api.nvim_create_augroup('waferline.ghost.' .. bufnr, { clear = true })
  vim.api.nvim_create_autocmd({ 'TextChangedI', 'InsertEnter' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      if require('waferline').enabled() then
        M.schedule(bufnr, opts.inline.debounce_ms)
      end
    end,
  })
  vim.api.nvim_create_autocmd('CursorMovedI', {
    group = group,
    buffer = bufnr,
    callback = function()
      -- Moving without typing makes the suggestion wrong for the new place.
      local st = states[bufnr]
      if st and st.item then
        local row, col = unpack(vim.api.nvim_win_get_cursor(0))
        if st.tick ~= vim.api.nvim_buf_get_changedtick(bufnr) or row - 1 ~= st.item.start_row or col < st.item.start_col then
          M.clear(bufnr)
        end
      end
    end,
  })
  vim.api.nvim_create_autocmd({ 'InsertLeave', 'BufLeave' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      stop_timer(state(bufnr))
      cancel_pending(bufnr)
      M.clear(bufnr)
    end,
  })
end

--- Stop drawing suggestions in a buffer.
---@param bufnr integer
function M.detach(bufnr)
  pcall(vim.api.nvim_del_augroup_by_name, 'waferline.ghost.' .. bufnr)
  if states[bufnr] then
    stop_timer(states[bufnr])
    cancel_pending(bufnr)
  end
  M.clear(bufnr)
  states[bufnr] = nil
end

return M
