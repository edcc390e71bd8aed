-- :checkhealth waferline — is the server found, which version, is a model loaded, how fast is a test completion.
local M = {}

local SAMPLE = { 'def add(a, b):', '    return ' } -- the test completion is asked at the end of line 2

--- Start a throwaway client on a scratch buffer (or reuse a running one) and wait until it is initialised.
---@return table? client, integer bufnr, boolean started, string? err
local function client_for_test(cmd, root, timeout_ms)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.bo[buf].buftype = 'nofile' -- keeps vim.lsp.enable from attaching its own client to it
  vim.api.nvim_buf_set_name(buf, vim.fs.joinpath(vim.fn.tempname(), 'waferline_health.py'))
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, SAMPLE)
  vim.bo[buf].filetype = 'python'
  local server = require('waferline.server')
  local running = server.clients()[1]
  local client_id, started
  if running then
    client_id, started = running.id, false
    vim.lsp.buf_attach_client(buf, client_id)
  else
    local opts = require('waferline.config').options
    client_id = vim.lsp.start({
      name = 'waferline-health',
      cmd = cmd,
      cmd_cwd = root,
      root_dir = root,
      init_options = server.as_object(opts.settings),
      settings = { waferline = server.as_object(opts.settings) },
    }, { bufnr = buf, reuse_client = function() return false end })
    started = true
  end
  if not client_id then
    return nil, buf, false, 'vim.lsp.start returned nothing'
  end
  local ok = vim.wait(timeout_ms, function()
    local c = vim.lsp.get_client_by_id(client_id)
    return c ~= nil and c.initialized == true
  end, 50)
  local client = vim.lsp.get_client_by_id(client_id)
  if not ok or not client then
    return nil, buf, started, ('the server did not initialise within %d ms'):format(timeout_ms)
  end
  return client, buf, started, nil
end

function M.check()
  local health = vim.health
  local server = require('waferline.server')
  local opts = require('waferline.config').options

  health.start('waferline: editor')
  local v = vim.version()
  local version = ('%d.%d.%d'):format(v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.12') == 1 then
    health.ok('Neovim ' .. version .. ': native inline completion (vim.lsp.inline_completion)')
  elseif vim.fn.has('nvim-0.10') == 1 then
    health.ok('Neovim ' .. version .. ': the plugin draws ghost text itself (no vim.lsp.inline_completion before 0.12)')
  else
    health.error('Neovim ' .. version .. ' is too old', { 'waferline needs Neovim 0.10 or newer' })
    return
  end
  if not require('waferline').is_setup() then
    health.warn('setup() has not been called', { 'add require("waferline").setup({}) to your config' })
  end

  health.start('waferline: server')
  local root = server.root(opts, vim.api.nvim_get_current_buf()) or vim.fn.getcwd()
  local cmd, why = server.resolve_cmd(opts, root)
  if not cmd then
    health.error(why)
    return
  end
  health.ok(('found: %s (from %s)'):format(table.concat(cmd, ' '), why))

  local client, buf, started, err = client_for_test(cmd, root, opts.health.timeout_ms)
  local function cleanup()
    if client then
      if started then
        client:stop(true)
      else
        vim.lsp.buf_detach_client(buf, client.id)
      end
    end
    pcall(vim.api.nvim_buf_delete, buf, { force = true })
  end
  if not client then
    health.error('could not start the server: ' .. err, { 'run `' .. table.concat(cmd, ' ') .. '` in a terminal to see why' })
    cleanup()
    return
  end
  local info = client.server_info or {}
  health.ok(('server: %s %s'):format(info.name or '?', info.version or '(no version reported)'))

  -- The server loads its model after `initialized`; until then waferline/stats says "no engine loaded".
  local engine, stats_err
  vim.wait(opts.health.timeout_ms, function()
    local reply = server.request_sync(client, 'waferline/stats', vim.empty_dict(), 2000, buf)
    stats_err = reply and reply.err
    engine = reply and reply.result and reply.result.engine
    return stats_err ~= nil or (type(engine) == 'string' and engine ~= 'no engine loaded')
  end, 200)
  if stats_err then
    health.error('waferline/stats failed: ' .. (stats_err.message or vim.inspect(stats_err)))
  elseif type(engine) == 'string' and vim.startswith(engine, 'failed to load') then
    health.error('the model ' .. engine, { 'check the `model` setting (docs/configuration.md)' })
  elseif type(engine) ~= 'string' or engine == 'no engine loaded' then
    health.error(('no model loaded within %d ms'):format(opts.health.timeout_ms),
      { 'see the server log: :LspLog', 'check the `model` setting (docs/configuration.md)' })
  else
    health.ok('model loaded: ' .. engine)
  end

  local params = {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    position = { line = #SAMPLE - 1, character = #SAMPLE[#SAMPLE] },
    context = { triggerKind = 1 }, -- Invoked
  }
  local t0 = vim.uv.hrtime()
  local reply = server.request_sync(client, 'textDocument/inlineCompletion', params, opts.health.timeout_ms, buf)
  local ms = (vim.uv.hrtime() - t0) / 1e6
  if not reply then
    health.error(('test completion: no answer within %d ms'):format(opts.health.timeout_ms))
  elseif reply.err then
    health.error('test completion failed: ' .. (reply.err.message or vim.inspect(reply.err)))
  else
    local items = reply.result and (reply.result.items or reply.result) or {}
    local first = items[1]
    local text = first and (type(first.insertText) == 'table' and first.insertText.value or first.insertText)
    if text and text ~= '' then
      health.ok(('test completion in %.0f ms: %q'):format(ms, text))
    else
      health.warn(('test completion answered in %.0f ms with no suggestion'):format(ms),
        { 'the model may be too small or the options too strict; see :WaferlineStats' })
    end
  end
  cleanup()
end

return M
