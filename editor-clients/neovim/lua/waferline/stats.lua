-- The figures behind the statusline and :WaferlineStats: the last completion's latency as this editor saw it
-- (request sent -> answer received, measured here) and the server's own counters from `waferline/stats`.
local server = require('waferline.server')

local M = {}

---@class waferline.Last
---@field latency_ms number? the last inline completion request, sent -> answered, in ms
---@field tok_s number? the server's decode speed (tokens/s) from waferline/stats
---@field state string "off" | "starting" | "ready" | "disabled"
M.last = { latency_ms = nil, tok_s = nil, state = 'off' }

---@class waferline.EngineState the server's `waferline/engineState` notification
---@field state string "loading" | "failed" | "ready" | "degraded" (a remote engine down, the local model answering) | "down"
---@field problems table<string, string>? why, per part ("completion", "chat"), naming the server
---@field engine string? the engine of inline completions
---@field chatEngine string? the engine of chat-style work
M.engine = { state = 'loading', problems = {} }

--- The server's engine changed state: remember it for the statusline and :WaferlineStatus (the server itself tells
--- the user once, with window/showMessage, when an engine stops answering).
---@param state waferline.EngineState?
function M.set_engine(state)
  if type(state) ~= 'table' then
    return
  end
  M.engine = state
  vim.cmd('redrawstatus')
end

local PARTS = { completion = 'inline completions', chat = 'chat-style work' }

--- Lines for :WaferlineStatus: the engine's state, each engine, and what is wrong with which.
---@return string[]
function M.status_lines()
  local e = M.engine
  local lines = { 'engine state: ' .. tostring(e.state) }
  if e.engine and e.engine ~= vim.NIL then
    lines[#lines + 1] = 'inline completions: ' .. e.engine
  end
  if e.chatEngine and e.chatEngine ~= vim.NIL and e.chatEngine ~= e.engine then
    lines[#lines + 1] = 'chat-style work: ' .. e.chatEngine
  end
  for part, why in pairs(type(e.problems) == 'table' and e.problems or {}) do
    lines[#lines + 1] = ('not answering (%s): %s'):format(PARTS[part] or part, why)
  end
  if e.state == 'degraded' then
    lines[#lines + 1] = 'the local model answers until the remote engine is back'
  end
  return lines
end

--- A short mark of the engine's state for the statusline ("" when all is well).
---@return string
local function engine_mark()
  local state = M.engine.state
  if state == 'degraded' then
    return '[remote down, local]'
  elseif state == 'down' then
    return '[remote down]'
  elseif state == 'failed' then
    return '[failed]'
  end
  return ''
end

local sent_at = {} ---@type table<string, integer> "client:request" -> hrtime (ns)
local refreshing = false

--- Ask the server for its counters. Calls `callback(stats)` or `callback(nil, err)`.
---@param callback fun(stats: table?, err: table?)
function M.fetch(callback)
  local client = server.clients()[1]
  if not client then
    callback(nil, { message = 'waferline is not running (open a file it attaches to)' })
    return
  end
  server.request(client, 'waferline/stats', vim.empty_dict(), function(err, result)
    callback(result, err)
  end)
end

--- Refresh tok/s from the server, at most one request in flight.
function M.refresh()
  if refreshing then
    return
  end
  refreshing = true
  M.fetch(function(stats)
    refreshing = false
    if stats and type(stats.decode_tok_s) == 'number' then
      M.last.tok_s = stats.decode_tok_s
    end
    vim.cmd('redrawstatus')
  end)
end

--- Time inline completion requests through the LspRequest autocmd, whichever code path (native or the plugin's
--- ghost text) sent them.
function M.track()
  local group = vim.api.nvim_create_augroup('waferline.stats', { clear = true })
  vim.api.nvim_create_autocmd('LspRequest', {
    group = group,
    callback = function(ev)
      local data = ev.data or {}
      local request = data.request or {}
      if request.method ~= 'textDocument/inlineCompletion' then
        return
      end
      local client = vim.lsp.get_client_by_id(data.client_id)
      if not client or client.name ~= server.name then
        return
      end
      local key = data.client_id .. ':' .. tostring(data.request_id)
      if request.type == 'pending' then
        sent_at[key] = vim.uv.hrtime()
      elseif request.type == 'complete' then
        local t0 = sent_at[key]
        sent_at[key] = nil
        if t0 then
          M.last.latency_ms = (vim.uv.hrtime() - t0) / 1e6
          M.refresh()
        end
      else -- cancel
        sent_at[key] = nil
      end
    end,
  })
end

--- The statusline component: "waferline 23ms 410tok/s", "waferline [remote down, local] 23ms", "waferline off", or
--- "" where waferline is not attached.
---@return string
function M.statusline()
  local clients = server.clients(vim.api.nvim_get_current_buf())
  if #clients == 0 then
    return ''
  end
  if not require('waferline').enabled() then
    return 'waferline off'
  end
  local parts = { 'waferline' }
  local mark = engine_mark()
  if mark ~= '' then
    parts[#parts + 1] = mark
  end
  if M.last.latency_ms then
    parts[#parts + 1] = ('%dms'):format(math.floor(M.last.latency_ms + 0.5))
  end
  if M.last.tok_s then
    parts[#parts + 1] = ('%dtok/s'):format(math.floor(M.last.tok_s + 0.5))
  end
  return table.concat(parts, ' ')
end

--- Human-readable lines for :WaferlineStats.
---@param stats table
---@return string[]
function M.format(stats)
  local keys = vim.tbl_keys(stats)
  table.sort(keys)
  local width = 0
  for _, k in ipairs(keys) do
    width = math.max(width, #k)
  end
  local lines = { '# server statistics', '' }
  if M.last.latency_ms then
    lines[#lines + 1] = ('  %-' .. width .. 's  %.1f'):format('last_latency_ms (editor)', M.last.latency_ms)
  end
  for _, k in ipairs(keys) do
    local v = stats[k]
    if v == vim.NIL then
      v = '-'
    end
    lines[#lines + 1] = ('  %-' .. width .. 's  %s'):format(k, tostring(v))
  end
  return lines
end

return M
