-- waferline for Neovim: starts `waferline serve`, shows its inline completions as ghost text, and offers
-- next-edit suggestions, :WaferlineAsk, :WaferlineStats, :WaferlineStatus, :WaferlineToggle, :WaferlineSuggest,
-- :WaferlineNextEdit and a statusline component. All intelligence is in the server.
local config = require('waferline.config')
local server = require('waferline.server')
local stats = require('waferline.stats')

local M = {}

local did_setup = false
local enabled = true

local function notify(msg, level)
  vim.notify('[waferline] ' .. msg, level or vim.log.levels.INFO)
end

--- Whether this Neovim draws ghost text itself (0.10/0.11, or forced) instead of vim.lsp.inline_completion.
---@return boolean
function M.uses_fallback()
  local mode = config.options.inline.fallback
  if mode == 'always' then
    return true
  end
  return mode == 'auto' and vim.lsp.inline_completion == nil
end

---@return boolean
function M.is_setup()
  return did_setup
end

---@return boolean
function M.enabled()
  return enabled and config.options.inline.enabled
end

--- Insert the suggestion on screen; false when there is none.
---@return boolean
function M.accept()
  local ghost = require('waferline.ghost')
  if M.uses_fallback() or ghost.visible(0) then -- the plugin's own ghost text (fallback, or asked for by suggest())
    return ghost.accept()
  end
  return vim.lsp.inline_completion ~= nil and require('waferline.partial').accept_native() or false
end

--- Accept the next word (`kind` "word") or line ("line") of the suggestion on screen; false when there is none.
---@param kind 'word'|'line'
---@return boolean
function M.accept_partial(kind)
  return require('waferline.partial').accept(kind)
end

--- Jump to the next edit on screen, or accept it when the cursor is on it; false when none is shown.
---@return boolean
function M.next_edit_jump()
  return require('waferline.nextedit').jump(0)
end

--- Accept the next edit on screen wherever the cursor is; false when none is shown.
---@return boolean
function M.next_edit_accept()
  return require('waferline.nextedit').accept(0)
end

--- Dismiss the next edit on screen; false when none is shown.
---@return boolean
function M.next_edit_dismiss()
  return require('waferline.nextedit').dismiss(0)
end

--- Ask for the next edit at the cursor now (:WaferlineNextEdit).
function M.next_edit()
  if M.enabled() then
    require('waferline.nextedit').request(vim.api.nvim_get_current_buf(), config.options)
  end
end

--- Ask for a suggestion now, as the editor's "trigger suggestion" key does (LSP triggerKind 1): the server may
--- show one it would hold back while typing (its `minConfidenceInvoked` option). Drawn by the plugin's ghost text.
function M.suggest()
  if M.enabled() then
    require('waferline.ghost').request(vim.api.nvim_get_current_buf(), true)
  end
end

--- Hide the suggestion and the next edit on screen.
function M.dismiss()
  require('waferline.nextedit').dismiss(0)
  if M.uses_fallback() then
    require('waferline.ghost').clear()
  elseif vim.lsp.inline_completion then
    -- Leaving and re-entering the capability clears its extmarks and pending requests.
    local buf = vim.api.nvim_get_current_buf()
    vim.lsp.inline_completion.enable(false, { bufnr = buf })
    vim.lsp.inline_completion.enable(M.enabled(), { bufnr = buf })
  end
end

local function set_native(bufnr, on)
  if not M.uses_fallback() and vim.lsp.inline_completion then
    vim.lsp.inline_completion.enable(on, { bufnr = bufnr })
  end
end

--- Insert-mode keymaps in a buffer waferline serves. A key with no suggestion on screen does what it did before.
local function map_keys(bufnr)
  local keys = config.options.keymaps
  local function map(lhs, fn, desc, modes)
    if lhs then
      vim.keymap.set(modes or 'i', lhs, fn, { buffer = bufnr, expr = true, silent = true, desc = desc })
    end
  end
  --- A key that acts when `fn` returns true and otherwise does what it did before.
  local function or_key(lhs, fn)
    return function()
      if fn() then
        return ''
      end
      return vim.api.nvim_replace_termcodes(lhs, true, true, true)
    end
  end
  map(keys.accept_word, or_key(keys.accept_word, function()
    return M.accept_partial('word')
  end), 'waferline: accept the next word of the suggestion')
  map(keys.accept_line, or_key(keys.accept_line, function()
    return M.accept_partial('line')
  end), 'waferline: accept the next line of the suggestion')
  map(keys.next_edit_jump, or_key(keys.next_edit_jump, M.next_edit_jump),
    'waferline: jump to the next edit (on it: accept it)', { 'n', 'i' })
  map(keys.next_edit_accept, or_key(keys.next_edit_accept, M.next_edit_accept), 'waferline: accept the next edit',
    { 'n', 'i' })
  map(keys.next_edit_dismiss, or_key(keys.next_edit_dismiss, M.next_edit_dismiss), 'waferline: dismiss the next edit',
    { 'n', 'i' })
  map(keys.accept, function()
    if M.accept() then
      return ''
    end
    return vim.api.nvim_replace_termcodes(keys.accept, true, true, true)
  end, 'waferline: accept the suggestion')
  map(keys.dismiss, function()
    M.dismiss()
    return ''
  end, 'waferline: hide the suggestion')
  if vim.lsp.inline_completion and not M.uses_fallback() then
    map(keys.next, function()
      vim.lsp.inline_completion.select({ count = 1 })
      return ''
    end, 'waferline: next suggestion')
    map(keys.prev, function()
      vim.lsp.inline_completion.select({ count = -1 })
      return ''
    end, 'waferline: previous suggestion')
  end
end

local function on_attach(bufnr)
  map_keys(bufnr)
  require('waferline.nextedit').attach(bufnr, config.options)
  require('waferline.focus').notify(bufnr) -- the buffer entered before the client attached: where its cursor is
  if M.uses_fallback() then
    require('waferline.ghost').attach(bufnr, config.options)
  else
    set_native(bufnr, M.enabled())
  end
  stats.last.state = M.enabled() and 'ready' or 'disabled'
end

--- Turn completions on or off everywhere; also tells the server (its `enable` option) so it stops working.
---@param on boolean?
function M.toggle(on)
  if on == nil then
    on = not enabled
  end
  enabled = on
  config.options.settings = vim.tbl_extend('force', config.options.settings or {}, { enable = on })
  server.push_settings(config.options)
  for _, client in ipairs(server.clients()) do
    for bufnr in pairs(client.attached_buffers or {}) do
      if M.uses_fallback() then
        require('waferline.ghost').clear(bufnr)
      else
        set_native(bufnr, on)
      end
    end
  end
  stats.last.state = on and 'ready' or 'disabled'
  notify('completions ' .. (on and 'on' or 'off'))
  vim.cmd('redrawstatus')
end

--- :WaferlineAsk
---@param question string
function M.ask(question)
  require('waferline.ask').ask(question, config.options)
end

--- :WaferlineStats — the server's counters in a floating window (`q` closes it).
function M.show_stats()
  stats.fetch(function(result, err)
    if err or not result then
      notify('stats unavailable: ' .. ((err and err.message) or 'no answer'), vim.log.levels.WARN)
      return
    end
    vim.lsp.util.open_floating_preview(stats.format(result), 'markdown', {
      border = config.options.ask.border,
      focus_id = 'waferline.stats',
      title = ' waferline stats ',
    })
  end)
end

--- :WaferlineStatus — the engine's state in a floating window: which engines serve what, what is not answering.
function M.show_status()
  vim.lsp.util.open_floating_preview(stats.status_lines(), 'markdown', {
    border = config.options.ask.border,
    focus_id = 'waferline.status',
    title = ' waferline status ',
  })
end

--- Statusline component: "waferline 23ms 410tok/s" (empty where waferline is not attached).
---@return string
function M.statusline()
  return stats.statusline()
end

--- Configure and start. Safe to call again: options are merged from the defaults anew, the LSP configuration is
--- replaced, and running servers receive the new settings.
---@param opts table?
function M.setup(opts)
  local options = config.merge(opts)
  enabled = options.inline.enabled
  if options.settings.enable ~= nil then
    enabled = enabled and options.settings.enable
  end
  if vim.fn.has('nvim-0.10') ~= 1 then
    notify('needs Neovim 0.10 or newer', vim.log.levels.ERROR)
    return
  end
  if options.inline.fallback == 'never' and vim.lsp.inline_completion == nil then
    notify('inline.fallback = "never" but this Neovim has no vim.lsp.inline_completion: no ghost text',
      vim.log.levels.WARN)
  end
  server.register(options)
  require('waferline.rewrite').register()
  stats.track()
  require('waferline.focus').track()
  local group = vim.api.nvim_create_augroup('waferline', { clear = true })
  vim.api.nvim_create_autocmd('LspAttach', {
    group = group,
    callback = function(ev)
      local client = vim.lsp.get_client_by_id(ev.data.client_id)
      if client and client.name == server.name then
        on_attach(ev.buf)
      end
    end,
  })
  vim.api.nvim_create_autocmd('LspDetach', {
    group = group,
    callback = function(ev)
      local client = vim.lsp.get_client_by_id(ev.data.client_id)
      if client and client.name == server.name then
        require('waferline.ghost').detach(ev.buf)
        require('waferline.nextedit').detach(ev.buf)
      end
    end,
  })
  if did_setup then
    server.push_settings(options)
    for _, client in ipairs(server.clients()) do
      for bufnr in pairs(client.attached_buffers or {}) do
        on_attach(bufnr)
      end
    end
  end
  did_setup = true
end

return M
