-- Only the user commands live here; everything else waits for require('waferline').setup().
if vim.g.loaded_waferline then
  return
end
vim.g.loaded_waferline = true

vim.api.nvim_create_user_command('WaferlineAsk', function(cmd)
  require('waferline').ask(cmd.args)
end, { nargs = '+', desc = 'waferline: ask a question about the repository' })

vim.api.nvim_create_user_command('WaferlineStats', function()
  require('waferline').show_stats()
end, { nargs = 0, desc = 'waferline: show the server statistics' })

vim.api.nvim_create_user_command('WaferlineStatus', function()
  require('waferline').show_status()
end, { nargs = 0, desc = 'waferline: show the engine state (a remote engine down, the local model answering)' })

vim.api.nvim_create_user_command('WaferlineToggle', function()
  require('waferline').toggle()
end, { nargs = 0, desc = 'waferline: turn completions on or off' })

vim.api.nvim_create_user_command('WaferlineSuggest', function()
  require('waferline').suggest()
end, { nargs = 0, desc = 'waferline: ask for a suggestion at the cursor now (as the trigger-suggestion key does)' })

vim.api.nvim_create_user_command('WaferlineNextEdit', function()
  require('waferline').next_edit()
end, { nargs = 0, desc = 'waferline: ask for the next edit at the cursor now' })
