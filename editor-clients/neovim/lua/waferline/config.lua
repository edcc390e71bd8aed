-- Options of the waferline Neovim plugin: the defaults, and the merge that setup() performs.
--
-- `settings` is passed to the server untouched (as initializationOptions and in
-- workspace/didChangeConfiguration under the `waferline` section); its keys are the server options documented in
-- docs/configuration.md. Everything else here is about the editor side only.
local M = {}

---@class waferline.Config
M.defaults = {
  -- How to start the server. `cmd` (a list) wins; else `path`, the `waferline` executable or a Python interpreter
  -- that has waferline installed; else `<root>/.venv/bin/waferline`; else `waferline` on $PATH.
  server = {
    cmd = nil, ---@type string[]?
    path = nil, ---@type string?
    args = {}, ---@type string[] extra arguments after `waferline serve`
  },
  -- Server options, passed through as they are (see docs/configuration.md for every key).
  settings = {},
  -- Filetypes to attach to; nil attaches to every buffer that has a filetype.
  filetypes = nil, ---@type string[]?
  root_markers = { '.git', 'pyproject.toml', 'package.json', 'Cargo.toml', 'go.mod', '.venv' },
  inline = {
    enabled = true,
    -- "auto": Neovim's own vim.lsp.inline_completion on 0.12+, the plugin's ghost text before;
    -- "always": the plugin's ghost text everywhere; "never": only the native one (nothing before 0.12).
    fallback = 'auto',
    debounce_ms = 75, -- fallback only: wait this long after the last keystroke before asking
  },
  -- Next-edit suggestions: after an edit, the server proposes the one that follows, anywhere in the buffer.
  next_edit = {
    enabled = true,
    debounce_ms = 150, -- wait this long after the last change (insert or normal mode) before asking
  },
  -- Keymaps; set one to false to leave that key alone. Each falls through to the key's usual meaning when there is
  -- nothing to act on.
  keymaps = {
    accept = '<Tab>', -- insert mode: accept the ghost text (falls through to a normal <Tab> when none is shown)
    dismiss = '<C-]>', -- insert mode: hide the ghost text and the next edit
    next = '<M-]>', -- insert mode: next candidate (native path)
    prev = '<M-[>', -- insert mode: previous candidate (native path)
    accept_word = '<M-Right>', -- insert mode: accept the next word of the ghost text
    accept_line = '<M-Down>', -- insert mode: accept the next line of the ghost text
    next_edit_jump = '<M-n>', -- insert and normal mode: jump to the next edit (on it: accept it)
    next_edit_accept = '<M-y>', -- insert and normal mode: accept the next edit wherever the cursor is
    next_edit_dismiss = '<M-c>', -- insert and normal mode: dismiss the next edit
  },
  ask = {
    border = 'rounded',
    max_width = 100, -- columns
    max_height = 30, -- lines
    timeout_ms = 60000,
  },
  health = {
    timeout_ms = 30000, -- how long :checkhealth waits for the server to start and answer a test completion
  },
}

---@type waferline.Config
M.options = vim.deepcopy(M.defaults)

--- Merge user options over the defaults. Called by setup(); merging from the defaults every time (not from the
--- previous options) makes a second setup() call mean exactly what it says.
---@param opts table?
---@return waferline.Config
function M.merge(opts)
  if opts ~= nil and type(opts) ~= 'table' then
    error('[waferline] setup() takes a table of options, not a ' .. type(opts))
  end
  local merged = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  local valid_fallback = { auto = true, always = true, never = true }
  if not valid_fallback[merged.inline.fallback] then
    error(('[waferline] inline.fallback must be "auto", "always" or "never", not %q'):format(merged.inline.fallback))
  end
  if type(merged.inline.debounce_ms) ~= 'number' or merged.inline.debounce_ms < 0 then
    error('[waferline] inline.debounce_ms must be a number of milliseconds >= 0')
  end
  if type(merged.next_edit.debounce_ms) ~= 'number' or merged.next_edit.debounce_ms < 0 then
    error('[waferline] next_edit.debounce_ms must be a number of milliseconds >= 0')
  end
  if type(merged.server.args) ~= 'table' then
    error('[waferline] server.args must be a list of strings')
  end
  M.options = merged
  return merged
end

return M
