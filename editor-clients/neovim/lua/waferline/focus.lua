-- Telling the server where the user is: `waferline/didFocus` with the buffer's URI and the cursor, when a buffer
-- waferline serves is entered (BufEnter, WinEnter), when insert mode starts in it (InsertEnter: that is where
-- typing begins) and when the client attaches to the current buffer. LSP has no such notification; the server
-- uses it to prefill the next suggestion's prompt while the user has not typed yet (docs/configuration.md).
local server = require('waferline.server')

local M = {}

M.method = 'waferline/didFocus'

local last = {} ---@type table<integer, string> client id -> the last focus sent ("uri:line:character")

--- The notification's params for the cursor of the current window (showing `bufnr`), in the client's position
--- encoding: `{ textDocument = { uri }, position = { line, character } }`, as LSP's position params.
---@param client table
---@return table
function M.params(client)
  return vim.lsp.util.make_position_params(0, client.offset_encoding or 'utf-16')
end

--- Tell every waferline client attached to `bufnr` (the current buffer) where its cursor is, once per position.
---@param bufnr integer
function M.notify(bufnr)
  if bufnr ~= vim.api.nvim_get_current_buf() then
    return
  end
  for _, client in ipairs(server.clients(bufnr)) do
    local params = M.params(client)
    local key = ('%s:%d:%d'):format(params.textDocument.uri, params.position.line, params.position.character)
    if last[client.id] ~= key then
      last[client.id] = key
      server.notify(client, M.method, params)
    end
  end
end

--- The autocommands that send it (called by setup()).
function M.track()
  local group = vim.api.nvim_create_augroup('waferline.focus', { clear = true })
  vim.api.nvim_create_autocmd({ 'BufEnter', 'WinEnter', 'InsertEnter' }, {
    group = group,
    callback = function(ev)
      M.notify(ev.buf)
    end,
  })
end

return M
