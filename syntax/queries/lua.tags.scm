; Tag queries for Lua. Capture conventions: see python.tags.scm; @receiver is the table a function is stored in.

(function_declaration name: (identifier) @name) @definition.function
(function_declaration name: (dot_index_expression table: (identifier) @receiver field: (identifier) @name)) @definition.function
(function_declaration name: (method_index_expression table: (identifier) @receiver method: (identifier) @name)) @definition.method
(assignment_statement
  (variable_list name: [(identifier) @name (dot_index_expression field: (identifier) @name)])
  (expression_list value: (function_definition))) @definition.function
(chunk (variable_declaration (assignment_statement (variable_list name: (identifier) @name)) @definition.variable))

(function_call name: (identifier) @reference.call)
(function_call name: (dot_index_expression field: (identifier) @reference.call))
(function_call name: (method_index_expression method: (identifier) @reference.call))
