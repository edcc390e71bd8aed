; Context captures for Lua (see __init__.py for what each capture means).
(variable_declaration
  (assignment_statement
    (expression_list
      value: (function_call name: (identifier) @_require (#eq? @_require "require"))))) @import

(function_declaration) @definition.function
(variable_declaration
  (assignment_statement (expression_list value: (function_definition)))) @definition.function

(comment) @comment
(string) @string
