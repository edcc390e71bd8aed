-- Keeping part of the ghost text: the next word or the next line of the suggestion on screen is inserted at the
-- cursor, the rest stays a suggestion (the server answers the next request with it at once: its typed-through
-- cache). Every accept, partial or whole, is reported with the text it kept
-- (`waferline/didAcceptCompletionText` {textDocument: {uri}, kind: "word" | "line" | "full", text}), so that the
-- server can count kept characters per shown suggestion (docs/editors.md). Works with Neovim's own
-- vim.lsp.inline_completion (0.12+) and with the plugin's ghost text (ghost.lua).
local server = require('waferline.server')

local M = {}

M.NOTIFICATION = 'waferline/didAcceptCompletionText'

--- The next piece of `rest` (the suggestion after the cursor): a word is the leading blanks and then a run of word
--- characters (or of other non-blank characters); a line is the rest of the current line or, at its end, the line
--- break and the next line.
---@param rest string
---@param kind 'word'|'line'
---@return string
function M.piece(rest, kind)
  if kind == 'line' then
    local nl = rest:find('\n', 1, true)
    if nl == nil then
      return rest
    end
    if nl > 1 then
      return rest:sub(1, nl - 1)
    end
    local after = rest:find('\n', 2, true)
    return after and rest:sub(1, after - 1) or rest
  end
  return rest:match('^%s*[%w_]+') or rest:match('^%s*[^%w_%s]+') or rest:match('^%s+') or rest
end

--- Tell the server what an accept kept.
function M.report(client, bufnr, kind, text)
  if client and text ~= '' then
    server.notify(client, M.NOTIFICATION, { textDocument = { uri = vim.uri_from_bufnr(bufnr) }, kind = kind, text = text })
  end
end

--- Insert `text` at the cursor (insert mode), the cursor after it.
local function insert_at_cursor(bufnr, text)
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  local lines = vim.split(text, '\n', { plain = true })
  vim.api.nvim_buf_set_text(bufnr, row - 1, col, row - 1, col, lines)
  local last_col = (#lines == 1 and col or 0) + #lines[#lines]
  vim.api.nvim_win_set_cursor(0, { row + #lines - 1, last_col })
end

--- What remains of a suggestion that starts at (row, col) with `text`, given the cursor: the text minus what the
--- user has typed of it on that row, or nil when the line no longer agrees with it.
function M.rest_of(bufnr, text, row, col)
  local crow, ccol = unpack(vim.api.nvim_win_get_cursor(0))
  if crow - 1 ~= row or ccol < col then
    return nil
  end
  local typed = vim.api.nvim_buf_get_text(bufnr, row, col, row, ccol, {})[1] or ''
  if text:sub(1, #typed) ~= typed then
    return nil
  end
  return text:sub(#typed + 1)
end

--- Keep the next word or line of a suggestion whose text starts at (row, col); returns false when nothing is left.
function M.keep(bufnr, client, text, row, col, kind)
  local rest = M.rest_of(bufnr, text, row, col)
  if not rest or rest == '' then
    return false
  end
  local piece = M.piece(rest, kind)
  insert_at_cursor(bufnr, piece)
  M.report(client, bufnr, kind, piece)
  return true
end

--- Accept the next word or line of the ghost text on screen (native or the plugin's). False when none is shown, so
--- that a keymap can fall through.
---@param kind 'word'|'line'
---@return boolean
function M.accept(kind)
  local bufnr = vim.api.nvim_get_current_buf()
  local ghost = require('waferline.ghost')
  if ghost.visible(bufnr) then
    local item = ghost.item(bufnr)
    ghost.clear(bufnr)
    vim.schedule(function()
      M.keep(bufnr, vim.lsp.get_client_by_id(item.client_id), item.text, item.start_row, item.start_col, kind)
    end)
    return true
  end
  local native = vim.lsp.inline_completion
  if not native or require('waferline').uses_fallback() then
    return false
  end
  return native.get({
    on_accept = function(item)
      if type(item.insert_text) ~= 'string' then
        return -- a snippet: kept whole or not at all
      end
      local row, col = unpack(vim.api.nvim_win_get_cursor(0))
      local start_row, start_col = row - 1, col
      if item.range then
        start_row, start_col = item.range.start.row, item.range.start.col
      end
      M.keep(bufnr, vim.lsp.get_client_by_id(item.client_id), item.insert_text, start_row, start_col, kind)
    end,
  })
end

--- Accept the whole native suggestion as vim.lsp.inline_completion.get() does, and report what it kept.
---@return boolean
function M.accept_native()
  local bufnr = vim.api.nvim_get_current_buf()
  return vim.lsp.inline_completion.get({
    on_accept = function(item)
      local client = vim.lsp.get_client_by_id(item.client_id)
      local text = item.insert_text
      if type(text) ~= 'string' then
        vim.snippet.expand(text.value)
      else
        local row, col = unpack(vim.api.nvim_win_get_cursor(0))
        local r = item.range
        local s_row, s_col, e_row, e_col = row - 1, col, row - 1, col
        if r then
          s_row, s_col, e_row, e_col = r.start.row, r.start.col, r.end_.row, r.end_.col
        end
        local kept = M.rest_of(bufnr, text, s_row, s_col) or text
        local lines = vim.split(text, '\n', { plain = true })
        vim.api.nvim_buf_set_text(bufnr, s_row, s_col, e_row, e_col, lines)
        vim.api.nvim_win_set_cursor(0, { s_row + #lines, (#lines == 1 and s_col or 0) + #lines[#lines] })
        M.report(client, bufnr, 'full', kept)
      end
      if item.command and client then
        client:exec_cmd(item.command, { bufnr = bufnr })
      end
    end,
  })
end

return M
