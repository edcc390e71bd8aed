-- :WaferlineAsk {question}: send `waferline/ask` to the server and show its Markdown answer in a floating window.
-- The request carries a `partialResultToken`, so a generated answer is shown as the model writes it (the server's
-- `$/progress` deltas, server.lua routes them here), then replaced by the whole result with its evidence.
local server = require('waferline.server')

local M = {}

local streams = {} -- partialResultToken -> function(delta) of the asks still waiting for their answer
local asked = 0
M.STREAMING = '*Generated answer (being written…)*'

--- A `$/progress` notification: true when it was a delta of an ask's answer (shown), false when it is not ours.
---@param params any
---@return boolean
function M.on_progress(params)
  local on_delta = type(params) == 'table' and streams[params.token] or nil
  if not on_delta then
    return false
  end
  if type(params.value) == 'table' and type(params.value.delta) == 'string' then
    on_delta(params.value.delta)
  end
  return true
end

--- The Markdown text of an answer, whatever shape the server gave it (a string, MarkupContent, or an object with
--- `answer`/`markdown`/`contents`).
---@param result any
---@return string
function M.markdown_of(result)
  if type(result) == 'string' then
    return result
  end
  if type(result) ~= 'table' then
    return vim.inspect(result)
  end
  for _, key in ipairs({ 'markdown', 'answer', 'value', 'contents' }) do
    local v = result[key]
    if type(v) == 'string' then
      return v
    elseif type(v) == 'table' and type(v.value) == 'string' then
      return v.value
    end
  end
  return vim.inspect(result)
end

--- Open the answer beside the cursor; `q` or leaving the window closes it.
---@param text string
---@param opts waferline.Config
---@return integer bufnr, integer winid
function M.show(text, opts)
  local lines = vim.split(text, '\n', { plain = true })
  return vim.lsp.util.open_floating_preview(lines, 'markdown', {
    border = opts.ask.border,
    max_width = opts.ask.max_width,
    max_height = opts.ask.max_height,
    focus_id = 'waferline.ask',
    title = ' waferline ',
    close_events = { 'BufLeave', 'InsertEnter' },
  })
end

--- Ask the server a question about the repository from the current buffer and cursor.
---@param question string
---@param opts waferline.Config
function M.ask(question, opts)
  question = vim.trim(question or '')
  if question == '' then
    vim.notify('[waferline] usage: :WaferlineAsk {question}', vim.log.levels.WARN)
    return
  end
  local bufnr = vim.api.nvim_get_current_buf()
  local client = server.clients(bufnr)[1] or server.clients()[1]
  if not client then
    vim.notify('[waferline] the server is not running: open a file in your project first', vim.log.levels.WARN)
    return
  end
  local params = { question = question }
  if vim.lsp.buf_is_attached(bufnr, client.id) then
    local pos = vim.lsp.util.make_position_params(0, client.offset_encoding)
    params.textDocument = pos.textDocument
    params.position = pos.position
  end
  asked = asked + 1
  local token = 'waferline-ask-' .. asked
  params.partialResultToken = token
  local streamed = ''
  streams[token] = function(delta)
    streamed = streamed .. delta
    M.show(M.STREAMING .. '\n\n' .. streamed, opts)
  end
  vim.api.nvim_echo({ { '[waferline] asking…' } }, false, {}) -- not kept in :messages
  server.request(client, 'waferline/ask', params, function(err, result)
    streams[token] = nil
    vim.api.nvim_echo({ { '' } }, false, {}) -- clear "asking…"
    if err then
      if err.code == -32601 then -- MethodNotFound
        vim.notify('[waferline] this server cannot answer questions (no waferline/ask): update it', vim.log.levels.WARN)
      else
        vim.notify('[waferline] ask failed: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
      end
      return
    end
    M.show(M.markdown_of(result), opts)
  end, bufnr)
end

return M
