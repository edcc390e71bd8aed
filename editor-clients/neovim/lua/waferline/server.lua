-- Finding and registering `waferline serve`: the only place that knows how the server is started.
local M = {}

M.name = 'waferline'

--- Whether a path names a Python interpreter rather than the `waferline` script.
---@param path string
local function is_python(path)
  return vim.fs.basename(path):match('^python[%d.]*$') ~= nil
end

--- The command line that starts the server for a project root, or nil and the reasons nothing was found.
--- Order: options.server.cmd, options.server.path, <root>/.venv/bin/waferline, `waferline` on $PATH.
---@param opts waferline.Config
---@param root string?
---@return string[]?, string
function M.resolve_cmd(opts, root)
  local tail = vim.list_extend({ 'serve' }, opts.server.args or {})
  if opts.server.cmd then
    return opts.server.cmd, 'server.cmd option'
  end
  local path = opts.server.path
  if path and path ~= '' then
    path = vim.fs.normalize(path)
    if vim.fn.executable(path) ~= 1 then
      return nil, ('server.path %q is not an executable file'):format(path)
    end
    if is_python(path) then
      return vim.list_extend({ path, '-m', 'waferline.cli' }, tail), 'server.path option (Python interpreter)'
    end
    return vim.list_extend({ path }, tail), 'server.path option'
  end
  for _, dir in ipairs({ root, vim.fn.getcwd() }) do
    if dir then
      local venv = vim.fs.joinpath(dir, '.venv', 'bin', 'waferline')
      if vim.fn.executable(venv) == 1 then
        return vim.list_extend({ venv }, tail), 'the project\'s .venv'
      end
    end
  end
  local exe = vim.fn.exepath('waferline')
  if exe ~= '' then
    return vim.list_extend({ exe }, tail), '$PATH'
  end
  return nil,
    'no `waferline` found (not in server.path, not in <project>/.venv/bin, not on $PATH). Fix: `.venv/bin/pip install -e /path/to/waferline` '
      .. 'into your project\'s .venv, or set require("waferline").setup({ server = { path = "/path/to/waferline" } })'
end

--- Client capabilities: Neovim before 0.12 does not announce inline completion, but the plugin's own ghost text
--- speaks it, so announce it ourselves.
---@return table
local function capabilities()
  local caps = vim.lsp.protocol.make_client_capabilities()
  caps.textDocument = caps.textDocument or {}
  caps.textDocument.inlineCompletion = caps.textDocument.inlineCompletion or { dynamicRegistration = false }
  return caps
end

local warned = false

--- Notifications from the server: `waferline/engineState` (loaded, a remote engine down or back) feeds the
--- statusline and :WaferlineStatus; `$/progress` on an ask's partialResultToken is its answer being written
--- (ask.lua), any other goes to Neovim's own handler (the indexing's work-done progress).
local handlers = {
  ['waferline/engineState'] = function(_, result)
    require('waferline.stats').set_engine(result)
  end,
  ['$/progress'] = function(err, result, ctx, config)
    if require('waferline.ask').on_progress(result) then
      return
    end
    local default = vim.lsp.handlers['$/progress']
    if default then
      return default(err, result, ctx, config)
    end
  end,
}

--- Settings as a JSON object: an empty Lua table would be sent as [] and the server expects {}.
---@param settings table?
---@return table
function M.as_object(settings)
  if settings == nil or next(settings) == nil then
    return vim.empty_dict()
  end
  return settings
end

--- Report a missing server once per session, with the fix, instead of as a spawn error on every buffer.
---@param why string
local function warn_once(why)
  if not warned then
    warned = true
    vim.notify('[waferline] ' .. why, vim.log.levels.ERROR)
  end
end

--- The project root of a buffer, or nil (single-file mode) when no marker is found above it.
---@param opts waferline.Config
---@param bufnr integer
---@return string?
function M.root(opts, bufnr)
  return vim.fs.root(bufnr, opts.root_markers)
end

--- The LSP client configuration (vim.lsp.config shape). `root_dir` is a function so that the server starts only for
--- file buffers and only when it can be found; `cmd` is a function so that each project finds its own .venv.
---@param opts waferline.Config
---@return table
function M.lsp_config(opts)
  return {
    cmd = function(dispatchers, config)
      local root = config and config.root_dir or nil
      local cmd, why = M.resolve_cmd(opts, root)
      assert(cmd, why) -- root_dir() below already checked that a command exists
      return vim.lsp.rpc.start(cmd, dispatchers, { cwd = root })
    end,
    root_dir = function(bufnr, on_dir)
      if vim.bo[bufnr].buftype ~= '' or vim.api.nvim_buf_get_name(bufnr) == '' then
        return
      end
      local root = M.root(opts, bufnr)
      local cmd, why = M.resolve_cmd(opts, root)
      if not cmd then
        warn_once(why)
        return
      end
      on_dir(root)
    end,
    filetypes = opts.filetypes,
    capabilities = capabilities(),
    handlers = handlers,
    init_options = M.as_object(opts.settings),
    settings = { waferline = M.as_object(opts.settings) },
  }
end

--- Register the server. 0.11+: vim.lsp.config/vim.lsp.enable. 0.10: vim.lsp.start from a FileType autocmd.
---@param opts waferline.Config
function M.register(opts)
  if vim.lsp.config and vim.lsp.enable then
    vim.lsp.config(M.name, M.lsp_config(opts))
    vim.lsp.enable(M.name)
    return
  end
  local group = vim.api.nvim_create_augroup('waferline.start', { clear = true })
  vim.api.nvim_create_autocmd('FileType', {
    group = group,
    pattern = opts.filetypes or '*',
    callback = function(ev)
      if vim.bo[ev.buf].buftype ~= '' or vim.api.nvim_buf_get_name(ev.buf) == '' then
        return
      end
      local root = M.root(opts, ev.buf)
      local cmd, why = M.resolve_cmd(opts, root)
      if not cmd then
        warn_once(why)
        return
      end
      vim.lsp.start({
        name = M.name,
        cmd = cmd,
        cmd_cwd = root,
        root_dir = root,
        capabilities = capabilities(),
        handlers = handlers,
        init_options = M.as_object(opts.settings),
        settings = { waferline = M.as_object(opts.settings) },
      }, { bufnr = ev.buf })
    end,
  })
end

--- Push changed settings to running servers (workspace/didChangeConfiguration), as setup() called again does.
---@param opts waferline.Config
function M.push_settings(opts)
  for _, client in ipairs(M.clients()) do
    client.settings = { waferline = M.as_object(opts.settings) }
    M.notify(client, 'workspace/didChangeConfiguration', { settings = client.settings })
  end
end

--- Running waferline clients, optionally only those attached to a buffer.
---@param bufnr integer?
---@return table[]
function M.clients(bufnr)
  return vim.lsp.get_clients({ name = M.name, bufnr = bufnr })
end

--- Send a request whatever the Neovim version (0.11 made request a method).
---@return boolean, integer?
function M.request(client, method, params, handler, bufnr)
  if vim.fn.has('nvim-0.11') == 1 then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

---@return table?, table?
function M.request_sync(client, method, params, timeout_ms, bufnr)
  if vim.fn.has('nvim-0.11') == 1 then
    return client:request_sync(method, params, timeout_ms, bufnr)
  end
  return client.request_sync(method, params, timeout_ms, bufnr)
end

function M.notify(client, method, params)
  if vim.fn.has('nvim-0.11') == 1 then
    return client:notify(method, params)
  end
  return client.notify(method, params)
end

function M.cancel(client, id)
  if vim.fn.has('nvim-0.11') == 1 then
    return client:cancel_request(id)
  end
  return client.cancel_request(id)
end

--- Cancel every request in `pending` (client id -> request id) whose client is still there; returns an empty table
--- for the caller to keep. Ghost text and next edits each keep one such table per buffer.
function M.cancel_all(pending)
  for client_id, request_id in pairs(pending) do
    local client = vim.lsp.get_client_by_id(client_id)
    if client then
      M.cancel(client, request_id)
    end
  end
  return {}
end

--- Stop and close the debounce timer `st.timer` (if any) and forget it.
function M.stop_timer(st)
  if st.timer then
    st.timer:stop()
    if not st.timer:is_closing() then
      st.timer:close()
    end
    st.timer = nil
  end
end

return M
