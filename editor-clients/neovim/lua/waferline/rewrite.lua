-- The "rewrite the selection as instructed…" code action. The server offers it as the command `waferline.rewrite`
-- whose argument says which code; the instruction is the user's, so Neovim runs the command here (vim.lsp.commands
-- come before the server's own), asks for the instruction with vim.ui.input, and sends workspace/executeCommand
-- with it. The server computes the edit and applies it with workspace/applyEdit.
local server = require('waferline.server')

local M = {}

M.COMMAND = 'waferline.rewrite'

local function notify(msg, level)
  vim.notify('[waferline] ' .. msg, level or vim.log.levels.INFO)
end

--- Send the command with its argument and the instruction.
local function send(client, argument, instruction, bufnr)
  local args = vim.deepcopy(argument)
  args.instruction = instruction
  local params = { command = M.COMMAND, arguments = { args } }
  server.request(client, 'workspace/executeCommand', params, function(err, result)
    if err then
      notify('rewrite failed: ' .. (err.message or vim.inspect(err)), vim.log.levels.WARN)
    elseif type(result) == 'table' and result.applied == false then
      notify('no rewrite: ' .. tostring(result.reason or 'the server made no change'), vim.log.levels.WARN)
    end
  end, bufnr)
end

--- vim.lsp.commands handler: `command` is the LSP Command of the code action, `ctx` has client_id and bufnr.
function M.run(command, ctx)
  local argument = (command.arguments or {})[1]
  local client = ctx and ctx.client_id and vim.lsp.get_client_by_id(ctx.client_id)
  if type(argument) ~= 'table' or not client then
    notify('rewrite: the code action carries no argument (update the server)', vim.log.levels.WARN)
    return
  end
  if type(argument.instruction) == 'string' and vim.trim(argument.instruction) ~= '' then
    send(client, argument, vim.trim(argument.instruction), ctx.bufnr)
    return
  end
  vim.ui.input({ prompt = 'waferline: rewrite as instructed: ' }, function(text)
    if type(text) ~= 'string' or vim.trim(text) == '' then
      return -- cancelled, or nothing asked for
    end
    send(client, argument, vim.trim(text), ctx.bufnr)
  end)
end

function M.register()
  vim.lsp.commands[M.COMMAND] = M.run
end

return M
